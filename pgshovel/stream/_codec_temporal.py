"""PostgreSQL date, time, timestamp and interval text <-> exact integer parts.

The text is what PostgreSQL's output functions print under the capture session
settings (DateStyle 'ISO, MDY', IntervalStyle 'postgres', TimeZone 'UTC'):
``0044-03-15 00:00:00+00 BC``, ``24:00:00``, ``12:34:56.5+05:53:28``,
``1 year 2 mons -3 days +04:05:06.789``. Parsing also takes any UTC offset a
timestamptz or timetz may carry. Formatting prints PostgreSQL's canonical
text, so formatting what was parsed gives back the original text. The
infinity codes are those of the protocol's ``Infinity`` enum (0 finite,
1 positive, 2 negative). Bad text raises ``ValueError`` with a lowercase reason;
the public codec adds the type name.
"""

from __future__ import annotations

import functools
import re

from pgshovel.stream._codec_calendar import civil_from_days, days_from_civil, days_in_month

FINITE, POSITIVE, NEGATIVE = 0, 1, 2

USECS_PER_SECOND = 1_000_000
USECS_PER_MINUTE = 60 * USECS_PER_SECOND
USECS_PER_HOUR = 60 * USECS_PER_MINUTE
USECS_PER_DAY = 24 * USECS_PER_HOUR

# PostgreSQL's limits: dates from 4714-11-24 BC (Julian day 0) to 5874897-12-31,
# timestamps from that same first day to the end of 294276-12-31.
MIN_DATE_DAYS = days_from_civil(-4713, 11, 24)
MAX_DATE_DAYS = days_from_civil(5874897, 12, 31)
MIN_TIMESTAMP = MIN_DATE_DAYS * USECS_PER_DAY
END_TIMESTAMP = days_from_civil(294277, 1, 1) * USECS_PER_DAY
# A timetz offset is below 16 hours either way.
MAX_UTC_OFFSET = 16 * 3600 - 1

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

_OFFSET = r"(?:([+-])([0-9]{2})(?::([0-9]{2})(?::([0-9]{2}))?)?)?"
_CLOCK = r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?"
_TIMESTAMP_RE = re.compile(r"([0-9]{4,})-([0-9]{2})-([0-9]{2}) " + _CLOCK + _OFFSET + r"( BC)?")
_DATE_RE = re.compile(r"([0-9]{4,})-([0-9]{2})-([0-9]{2})( BC)?")
_TIME_RE = re.compile(_CLOCK + _OFFSET)
# The form almost every timestamp of a stream takes (four-digit year, AD, UTC):
# its text up to the minute is looked up in a cache of validated minutes.
_COMMON_TIMESTAMP = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?(\+00)?"
).fullmatch
_MINUTES: dict[str, int] = {}
_MAX_CACHED_MINUTES = 65_536
# The other way round: minutes since 1970 -> their text and era, for formatting.
_MINUTE_TEXTS: dict[int, tuple[str, str]] = {}
_SECONDS = tuple(f":{second:02d}" for second in range(60))
_INTERVAL_CLOCK_RE = re.compile(r"([+-]?)([0-9]+):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?")
_INTERVAL_NUMBER_RE = re.compile(r"[+-]?[0-9]+")
# PostgreSQL prints the smallest time part, -2^63 microseconds, as
# '-2562047788:00:54.775808' but cannot read that back (its clock parser
# overflows); it reads this spelling of the same amount.
_MIN_MICROS = -(2**63)
_MIN_MICROS_TEXT = "-2562047788 hours -54.775808 secs"
_INTERVAL_UNITS = {
    "year": 0,
    "years": 0,
    "mon": 1,
    "mons": 1,
    "day": 2,
    "days": 2,
}


def _fraction(digits: str | None) -> int:
    """Microseconds of a fraction of a second given by up to six digits."""
    if not digits:
        return 0
    return int(digits.ljust(6, "0"))


def _format_fraction(micros: int) -> str:
    """``.ffffff`` without trailing zeros, or nothing for a whole second."""
    if not micros:
        return ""
    return f".{micros:06d}".rstrip("0")


# Rows of one stream cluster around a few days: remember the calendar work.
@functools.lru_cache(maxsize=4096)
def _civil_days(year_text: str, month_text: str, day_text: str, bc: bool) -> int:
    """Days since 1970-01-01 of a printed date, checking that the date exists."""
    year, month, day = int(year_text), int(month_text), int(day_text)
    if year == 0:
        raise ValueError("year 0 does not exist (1 BC precedes 1 AD)")
    if bc:
        year = 1 - year
    if not 1 <= month <= 12 or not 1 <= day <= days_in_month(year, month):
        raise ValueError("no such calendar date")
    return days_from_civil(year, month, day)


def _clock_micros(hour: str, minute: str, second: str, fraction: str | None) -> int:
    """Microseconds since midnight of a printed clock time (24:00:00 allowed)."""
    h, m, s = int(hour), int(minute), int(second)
    if m > 59 or s > 59:
        raise ValueError("minutes and seconds must be below 60")
    micros = h * USECS_PER_HOUR + m * USECS_PER_MINUTE + s * USECS_PER_SECOND + _fraction(fraction)
    if micros > USECS_PER_DAY:
        raise ValueError("a time of day cannot pass 24:00:00")
    return micros


def _offset_seconds(sign: str, hour: str, minute: str | None, second: str | None) -> int:
    """Seconds east of UTC of a printed offset such as ``+05:30`` or ``-03``."""
    m, s = int(minute or 0), int(second or 0)
    if m > 59 or s > 59:
        raise ValueError("offset minutes and seconds must be below 60")
    seconds = int(hour) * 3600 + m * 60 + s
    if seconds > MAX_UTC_OFFSET:
        raise ValueError("utc offset must be below 16 hours")
    return -seconds if sign == "-" else seconds


def _format_offset(seconds_east: int) -> str:
    """PostgreSQL's offset text: ``+00``, ``-03``, ``+05:30``, ``+05:53:28``."""
    sign = "-" if seconds_east < 0 else "+"
    minutes, second = divmod(abs(seconds_east), 60)
    hour, minute = divmod(minutes, 60)
    if second:
        return f"{sign}{hour:02d}:{minute:02d}:{second:02d}"
    if minute:
        return f"{sign}{hour:02d}:{minute:02d}"
    return f"{sign}{hour:02d}"


def _format_clock(micros: int) -> str:
    seconds, fraction = divmod(micros, USECS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{hour:02d}:{minute:02d}:{second:02d}{_format_fraction(fraction)}"


def _minute_micros(minute: str) -> int | None:
    """Micros of a ``YYYY-MM-DD HH:MM`` text, or None when it is no valid minute."""
    hour, minutes = int(minute[11:13]), int(minute[14:16])
    if hour > 23 or minutes > 59:
        return None  # 24:00:00 and errors take the general path
    try:
        days = _civil_days(minute[:4], minute[5:7], minute[8:10], False)
    except ValueError:
        return None
    micros = days * USECS_PER_DAY + hour * USECS_PER_HOUR + minutes * USECS_PER_MINUTE
    if len(_MINUTES) >= _MAX_CACHED_MINUTES:
        _MINUTES.clear()
    _MINUTES[minute] = micros
    return micros


def parse_timestamp(text: str, with_zone: bool) -> tuple[int, int]:
    """``(micros since 1970-01-01 (UTC if with_zone), infinity code)`` of the text."""
    common = _COMMON_TIMESTAMP(text)
    if common is not None:
        minute, second, fraction, utc = common.groups()
        base = _MINUTES.get(minute)
        if base is None:
            base = _minute_micros(minute)
        # Years 0001-9999 are always in range; a leap second or an offset on a
        # timestamp without time zone takes the general path, which rejects it.
        if base is not None and second < "60" and (with_zone or utc is None):
            micros = base + int(second) * USECS_PER_SECOND
            if fraction:
                micros += int(fraction.ljust(6, "0"))
            return micros, FINITE
    if text == "infinity":
        return 0, POSITIVE
    if text == "-infinity":
        return 0, NEGATIVE
    match = _TIMESTAMP_RE.fullmatch(text)
    if match is None:
        raise ValueError("expected 'YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]][ BC]'")
    year, month, day, hour, minute, second, fraction, sign, oh, om, os_, bc = match.groups()
    days = _civil_days(year, month, day, bc is not None)
    micros = days * USECS_PER_DAY + _clock_micros(hour, minute, second, fraction)
    if sign is not None:
        if not with_zone:
            raise ValueError("a timestamp without time zone carries no utc offset")
        micros -= _offset_seconds(sign, oh, om, os_) * USECS_PER_SECOND
    check_timestamp(micros)
    return micros, FINITE


def check_timestamp(micros: int) -> None:
    """Raise ``ValueError`` unless PostgreSQL can store this timestamp."""
    if not MIN_TIMESTAMP <= micros < END_TIMESTAMP:
        raise ValueError("timestamp outside PostgreSQL's range 4714-11-24 BC to 294276 AD")


@functools.lru_cache(maxsize=4096)
def _format_day(days: int) -> tuple[str, str]:
    """``(YYYY-MM-DD, era suffix)`` of a day: the suffix is ``' BC'`` or empty."""
    year, month, day = civil_from_days(days)
    if year <= 0:
        return f"{1 - year:04d}-{month:02d}-{day:02d}", " BC"
    return f"{year:04d}-{month:02d}-{day:02d}", ""


def _minute_text(minute: int) -> tuple[str, str]:
    """``('YYYY-MM-DD HH:MM', era suffix)`` of a minute since 1970, remembered."""
    days, minute_of_day = divmod(minute, 24 * 60)
    day, era = _format_day(days)
    hour, minute_of_hour = divmod(minute_of_day, 60)
    text = (f"{day} {hour:02d}:{minute_of_hour:02d}", era)
    if len(_MINUTE_TEXTS) >= _MAX_CACHED_MINUTES:
        _MINUTE_TEXTS.clear()
    _MINUTE_TEXTS[minute] = text
    return text


def format_timestamp(micros: int, with_zone: bool, infinity: int) -> str:
    """PostgreSQL's text of a timestamp; with_zone prints it in UTC with ``+00``."""
    if infinity:
        if infinity == POSITIVE:
            return "infinity"
        if infinity == NEGATIVE:
            return "-infinity"
    if not MIN_TIMESTAMP <= micros < END_TIMESTAMP:
        check_timestamp(micros)
    # Timestamps of a stream cluster around a few minutes: their text up to the
    # minute is looked up, only seconds and fraction are printed each time.
    minute, rest = divmod(micros, USECS_PER_MINUTE)
    head, era = _MINUTE_TEXTS.get(minute) or _minute_text(minute)
    second, fraction = divmod(rest, USECS_PER_SECOND)
    if fraction:
        text = head + _SECONDS[second] + f".{fraction:06d}".rstrip("0")
    else:
        text = head + _SECONDS[second]
    if with_zone:
        text += "+00"
    return text + era if era else text


def parse_date(text: str) -> tuple[int, int]:
    """``(days since 1970-01-01, infinity code)`` of a date's text."""
    if text == "infinity":
        return 0, POSITIVE
    if text == "-infinity":
        return 0, NEGATIVE
    match = _DATE_RE.fullmatch(text)
    if match is None:
        raise ValueError("expected 'YYYY-MM-DD[ BC]'")
    year, month, day, bc = match.groups()
    days = _civil_days(year, month, day, bc is not None)
    check_date(days)
    return days, FINITE


def check_date(days: int) -> None:
    """Raise ``ValueError`` unless PostgreSQL can store this date."""
    if not MIN_DATE_DAYS <= days <= MAX_DATE_DAYS:
        raise ValueError("date outside PostgreSQL's range 4714-11-24 BC to 5874897-12-31")


def format_date(days: int, infinity: int) -> str:
    """PostgreSQL's text of a date."""
    if infinity == POSITIVE:
        return "infinity"
    if infinity == NEGATIVE:
        return "-infinity"
    check_date(days)
    day, era = _format_day(days)
    return day + era


def parse_time(text: str, with_zone: bool) -> tuple[int, int]:
    """``(micros since midnight, utc offset in seconds east)`` of a time or timetz."""
    match = _TIME_RE.fullmatch(text)
    if match is None:
        raise ValueError("expected 'HH:MM:SS[.ffffff]' with a '+HH[:MM[:SS]]' offset for timetz")
    hour, minute, second, fraction, sign, oh, om, os_ = match.groups()
    micros = _clock_micros(hour, minute, second, fraction)
    if sign is None:
        if with_zone:
            raise ValueError("a time with time zone needs its utc offset")
        return micros, 0
    if not with_zone:
        raise ValueError("a time without time zone carries no utc offset")
    return micros, _offset_seconds(sign, oh, om, os_)


def format_time(micros: int, with_zone: bool, utc_offset: int) -> str:
    """PostgreSQL's text of a time, or of a timetz with its offset."""
    if not 0 <= micros <= USECS_PER_DAY:
        raise ValueError("time of day outside 00:00:00 to 24:00:00")
    if not with_zone:
        return _format_clock(micros)
    if abs(utc_offset) > MAX_UTC_OFFSET:
        raise ValueError("utc offset must be below 16 hours")
    return _format_clock(micros) + _format_offset(utc_offset)


def _check_range(value: int, bounds: tuple[int, int], what: str) -> int:
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"interval {what} out of range")
    return value


def parse_interval(text: str) -> tuple[int, int, int]:
    """``(months, days, micros)`` of an interval in the 'postgres' IntervalStyle."""
    if text.endswith(_MIN_MICROS_TEXT):
        head = text[: -len(_MIN_MICROS_TEXT)]
        if head and not head.endswith(" "):
            raise ValueError("expected '[N years] [N mons] [N days] [[+-]HH:MM:SS[.ffffff]]'")
        months, days, micros = parse_interval(head[:-1]) if head else (0, 0, 0)
        if micros:
            raise ValueError("an interval has one time part")
        return months, days, _MIN_MICROS
    fields = [0, 0, 0]
    seen = [False, False, False]
    words = text.split(" ")
    count = len(words)
    index = 0
    while index + 1 < count and words[index + 1] in _INTERVAL_UNITS:
        number, unit = words[index], _INTERVAL_UNITS[words[index + 1]]
        if _INTERVAL_NUMBER_RE.fullmatch(number) is None or seen[unit]:
            raise ValueError("expected '[N years] [N mons] [N days] [[+-]HH:MM:SS[.ffffff]]'")
        seen[unit] = True
        fields[unit] = int(number)
        index += 2
    micros = 0
    if index < count:
        clock = _INTERVAL_CLOCK_RE.fullmatch(words[index]) if index == count - 1 else None
        if clock is None:
            raise ValueError("expected '[N years] [N mons] [N days] [[+-]HH:MM:SS[.ffffff]]'")
        sign, hour, minute, second, fraction = clock.groups()
        if int(minute) > 59 or int(second) > 59:
            raise ValueError("interval minutes and seconds must be below 60")
        micros = (
            int(hour) * USECS_PER_HOUR
            + int(minute) * USECS_PER_MINUTE
            + int(second) * USECS_PER_SECOND
            + _fraction(fraction)
        )
        if sign == "-":
            micros = -micros
    elif index == 0:
        raise ValueError("an empty interval text")
    months = _check_range(fields[0] * 12 + fields[1], _INT32, "months")
    days = _check_range(fields[2], _INT32, "days")
    return months, days, _check_range(micros, _INT64, "microseconds")


def _truncated_division(value: int, divisor: int) -> int:
    """C's integer division (towards zero), as PostgreSQL splits months into years."""
    quotient = abs(value) // divisor
    return -quotient if value < 0 else quotient


def format_interval(months: int, days: int, micros: int) -> str:
    """PostgreSQL's 'postgres' IntervalStyle text of an interval.

    The one exception is a time part of exactly -2^63 microseconds, printed in
    the unit form PostgreSQL can read back.
    """
    _check_range(months, _INT32, "months")
    _check_range(days, _INT32, "days")
    _check_range(micros, _INT64, "microseconds")
    years = _truncated_division(months, 12)
    parts = []
    after_negative = False
    for value, unit in ((years, "year"), (months - years * 12, "mon"), (days, "day")):
        if value:
            plus = "+" if after_negative and value > 0 else ""
            plural = "" if value == 1 else "s"
            parts.append(f"{plus}{value} {unit}{plural}")
            after_negative = value < 0
    if micros == _MIN_MICROS:
        parts.append(_MIN_MICROS_TEXT)
    elif micros or not parts:
        sign = "-" if micros < 0 else ("+" if after_negative else "")
        seconds, fraction = divmod(abs(micros), USECS_PER_SECOND)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        parts.append(f"{sign}{hour:02d}:{minute:02d}:{second:02d}{_format_fraction(fraction)}")
    return " ".join(parts)
