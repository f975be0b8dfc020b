"""Proleptic Gregorian day arithmetic over the whole range PostgreSQL supports.

Python's ``datetime`` stops at years 1 and 9999, but PostgreSQL dates run from
4714-11-24 BC to 5874897 AD; these pure functions convert between a civil date
(astronomical year numbering: 1 BC is year 0, 2 BC is year -1) and a count of
days since 1970-01-01. The computation works in 400-year eras of 146097 days,
counting months from March so that the leap day falls at the end of a year.
"""

from __future__ import annotations

DAYS_PER_ERA = 146_097
# Days from 0000-03-01 (the start of era 0 counted from March) to 1970-01-01.
_EPOCH_SHIFT = 719_468
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap_year(year: int) -> bool:
    """Whether ``year`` (astronomical numbering) has a 29 February."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    """The number of days of ``month`` (1-12) in ``year`` (astronomical numbering)."""
    if month == 2 and is_leap_year(year):
        return 29
    return _MONTH_DAYS[month - 1]


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a valid civil date (astronomical year numbering)."""
    if month <= 2:
        year -= 1
    era = year // 400
    year_of_era = year - era * 400
    month_from_march = month - 3 if month > 2 else month + 9
    day_of_year = (153 * month_from_march + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * DAYS_PER_ERA + day_of_era - _EPOCH_SHIFT


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The civil date ``(year, month, day)`` that is ``days`` after 1970-01-01."""
    shifted = days + _EPOCH_SHIFT
    era = shifted // DAYS_PER_ERA
    day_of_era = shifted - era * DAYS_PER_ERA
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (year_of_era * 365 + year_of_era // 4 - year_of_era // 100)
    month_from_march = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_from_march + 2) // 5 + 1
    month = month_from_march + 3 if month_from_march < 10 else month_from_march - 9
    year = year_of_era + era * 400 + (1 if month <= 2 else 0)
    return year, month, day
