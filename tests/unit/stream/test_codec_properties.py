"""Property tests: generated values, rendered as PostgreSQL 15 prints them, round-trip.

The renderers here are independent of the codec: dates go through Python's
``datetime`` shifted by whole 400-year Gregorian cycles (146097 days), floats
through ``Decimal``, arrays through a character-by-character quoter. Each
property checks that ``to_value`` yields the expected fields and that
``to_text`` gives back exactly the rendered text.
"""

from __future__ import annotations

import datetime
import math
import struct
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import to_text, to_value

Value = stream_pb2.Value
USECS_PER_DAY = 86_400_000_000
EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
CYCLE_DAYS, CYCLE_YEARS = 146_097, 400
FIRST_DAY = -2440588  # 4714-11-24 BC
LAST_DATE_DAY = 2145042905  # 5874897-12-31
LAST_TIMESTAMP_MICROS = 2**63 - 1  # the protocol's limit, inside PostgreSQL's range
MAX_OFFSET = 16 * 3600 - 1


def render_day(days: int) -> str:
    """``YYYY-MM-DD[ BC]`` through datetime, moving whole 400-year cycles."""
    ordinal = days + EPOCH_ORDINAL
    cycles = (ordinal - 1) // CYCLE_DAYS
    day = datetime.date.fromordinal(ordinal - cycles * CYCLE_DAYS)
    year = day.year + cycles * CYCLE_YEARS
    if year <= 0:
        return f"{1 - year:04d}-{day.month:02d}-{day.day:02d} BC"
    return f"{year:04d}-{day.month:02d}-{day.day:02d}"


def render_clock(micros: int) -> str:
    clock = datetime.timedelta(microseconds=micros)
    hours = clock.days * 24 + clock.seconds // 3600
    text = f"{hours:02d}:{clock.seconds // 60 % 60:02d}:{clock.seconds % 60:02d}"
    if clock.microseconds:
        text += "." + str(clock.microseconds).rjust(6, "0").rstrip("0")
    return text


def render_offset(seconds: int) -> str:
    sign = "+" if seconds >= 0 else "-"
    hours, rest = abs(seconds) // 3600, abs(seconds) % 3600
    text = f"{sign}{hours:02d}"
    if rest:
        text += f":{rest // 60:02d}"
        if rest % 60:
            text += f":{rest % 60:02d}"
    return text


def render_timestamp(micros: int, offset: int | None) -> str:
    """A timestamp's text; with an offset, the local time at that offset."""
    local = micros + (offset or 0) * 1_000_000
    days, clock = local // USECS_PER_DAY, local % USECS_PER_DAY
    date_text = render_day(days)
    era = ""
    if date_text.endswith(" BC"):
        date_text, era = date_text[:-3], " BC"
    zone = "" if offset is None else render_offset(offset)
    return f"{date_text} {render_clock(clock)}{zone}{era}"


def render_float(number: float) -> str:
    """PostgreSQL's float8 text, by brute force: the fewest correctly rounded digits
    that read back and are not exactly halfway to a neighbouring double."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "-0" if math.copysign(1, number) < 0 else "0"
    exact_number = Decimal(number)
    below, above = math.nextafter(number, -math.inf), math.nextafter(number, math.inf)
    halfway = {(Fraction(number) + Fraction(n)) / 2 for n in (below, above) if math.isfinite(n)}
    for count in range(1, 18):
        candidates = [
            Context(prec=count, rounding=rounding).plus(exact_number)
            for rounding in (ROUND_FLOOR, ROUND_CEILING)
        ]
        valid = [c for c in candidates if float(c) == number and Fraction(c) not in halfway]
        if valid:
            # An exact tie between two candidates goes to the even last digit, as
            # PostgreSQL's Ryu does (-70368744177664.125 prints ...12, 562949953421312.75 ...8).
            text = str(
                min(valid, key=lambda c: (abs(c - exact_number), c.as_tuple().digits[-1] % 2))
            )
            break
    exact = Decimal(text).normalize()
    sign, digits, _ = exact.as_tuple()
    exponent = exact.adjusted()
    if -4 <= exponent < 15:
        return format(exact, "f")
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def render_element(text: str | None) -> str:
    if text is None:
        return "NULL"
    special = '{}",\\ \t\n\r\v\f'
    if text and text.upper() != "NULL" and not any(char in special for char in text):
        return text
    escaped = "".join("\\" + char if char in '"\\' else char for char in text)
    return f'"{escaped}"'


def render_array(nested: object, lower_bounds: list[int], dimensions: list[int]) -> str:
    def body(node: object) -> str:
        if isinstance(node, list):
            return "{" + ",".join(body(child) for child in node) + "}"
        assert node is None or isinstance(node, str)
        return render_element(node)

    text = body(nested)
    if any(bound != 1 for bound in lower_bounds):
        text = (
            "".join(f"[{b}:{b + d - 1}]" for b, d in zip(lower_bounds, dimensions, strict=True))
            + "="
            + text
        )
    return text


def same(left: stream_pb2.Value, right: stream_pb2.Value) -> bool:
    return left.SerializeToString(deterministic=True) == right.SerializeToString(deterministic=True)


@given(
    st.sampled_from([("int2", 15), ("int4", 31), ("int8", 63)]).flatmap(
        lambda spec: st.tuples(st.just(spec[0]), st.integers(-(2 ** spec[1]), 2 ** spec[1] - 1))
    )
)
def test_integers_round_trip(case: tuple[str, int]) -> None:
    type_name, number = case
    value = to_value(type_name, str(number))
    assert value.int64 == number
    assert to_text(value) == str(number)


@given(
    st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(
        [
            1e23,
            4.3555874920897984e16,
            2.0**-1074,
            2.0**1023,
            1e15,
            1e-5,
            -70368744177664.125,
            562949953421312.75,
        ]
    )
)
def test_float8_round_trips_bit_for_bit(number: float) -> None:
    text = render_float(number)
    value = to_value("float8", text)
    assert struct.pack("<d", value.double) == struct.pack("<d", number) or math.isnan(number)
    assert to_text(value) == text


def shortest_float4(number: float) -> str:
    """PostgreSQL's float4 text: the fewest significant digits that read back exactly."""
    if math.isinf(number) or number == 0:
        return render_float(number)
    single = struct.pack("<f", number)
    for digits in range(1, 10):
        text = f"{number:.{digits}g}"
        try:
            if struct.pack("<f", float(text)) == single:
                return text
        except OverflowError:  # rounded past the largest float4
            continue
    raise AssertionError(f"no float4 text for {number!r}")


@given(st.floats(width=32, allow_nan=False))
def test_float4_text_reads_back_as_the_same_float4(number: float) -> None:
    text = shortest_float4(number)
    value = to_value("float4", text)
    assert value.double == float(text)
    assert struct.pack("<f", float(to_text(value) or "")) == struct.pack("<f", number)


numeric_texts = st.one_of(
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),
    st.builds(
        lambda negative, unscaled, scale: (
            ("-" if negative and unscaled else "")
            + (str(unscaled).rjust(scale + 1, "0")[:-scale] or "0")
            + ("." + str(unscaled).rjust(scale + 1, "0")[-scale:] if scale else "")
        ),
        st.booleans(),
        st.integers(0, 10**1200),
        st.integers(0, 1000),
    ),
)


@given(numeric_texts)
def test_numeric_keeps_its_exact_text(text: str) -> None:
    value = to_value("numeric", text)
    assert value.decimal == text
    assert to_text(value) == text
    if text not in ("NaN", "Infinity", "-Infinity"):
        assert Decimal(text).as_tuple().exponent == -len(text.partition(".")[2])


@given(st.integers(FIRST_DAY * USECS_PER_DAY, LAST_TIMESTAMP_MICROS), st.booleans())
def test_timestamps_round_trip_across_the_whole_range(micros: int, with_zone: bool) -> None:
    text = render_timestamp(micros, 0 if with_zone else None)
    type_name = "timestamptz" if with_zone else "timestamp"
    value = to_value(type_name, text)
    assert value.timestamp == stream_pb2.Timestamp(micros=micros, with_zone=with_zone)
    assert to_text(value) == text


@given(
    st.integers(FIRST_DAY * USECS_PER_DAY + USECS_PER_DAY, 2**62),
    st.integers(-MAX_OFFSET, MAX_OFFSET),
)
def test_timestamptz_with_any_offset_means_the_same_instant(micros: int, offset: int) -> None:
    value = to_value("timestamptz", render_timestamp(micros, offset))
    assert value.timestamp.micros == micros
    assert to_text(value) == render_timestamp(micros, 0)


@given(st.integers(FIRST_DAY, LAST_DATE_DAY))
def test_dates_round_trip_across_the_whole_range(days: int) -> None:
    text = render_day(days)
    value = to_value("date", text)
    assert value.date == stream_pb2.Date(days=days)
    assert to_text(value) == text


@given(st.integers(0, USECS_PER_DAY), st.one_of(st.none(), st.integers(-MAX_OFFSET, MAX_OFFSET)))
def test_times_round_trip(micros: int, offset: int | None) -> None:
    text = render_clock(micros) + ("" if offset is None else render_offset(offset))
    value = to_value("time" if offset is None else "timetz", text)
    expected = stream_pb2.Time(micros=micros, with_zone=offset is not None, utc_offset=offset or 0)
    assert value.time == expected
    assert to_text(value) == text


def render_interval(months: int, days: int, micros: int) -> str:
    """The 'postgres' IntervalStyle: signed fields, '+' after a negative field."""
    years = int(Decimal(months) / 12)  # truncation towards zero, like C
    fields = [(years, "year"), (months - 12 * years, "mon"), (days, "day")]
    words: list[str] = []
    previous_negative = False
    for amount, unit in fields:
        if amount == 0:
            continue
        sign = "+" if previous_negative and amount > 0 else ""
        words.append(f"{sign}{amount} {unit}" + ("" if amount == 1 else "s"))
        previous_negative = amount < 0
    if micros == -(2**63):  # what PostgreSQL reads, not the clock it prints
        words.append("-2562047788 hours -54.775808 secs")
    elif micros or not words:
        sign = "-" if micros < 0 else "+" if previous_negative else ""
        words.append(sign + render_clock(abs(micros)))
    return " ".join(words)


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
def test_intervals_keep_months_days_and_micros_apart(months: int, days: int, micros: int) -> None:
    text = render_interval(months, days, micros)
    value = to_value("interval", text)
    assert value.interval == stream_pb2.Interval(months=months, days=days, micros=micros)
    assert to_text(value) == text


element_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=12,
) | st.sampled_from(["NULL", "null", "", " ", '"', "\\", "{}", "a,b", "é ✓"])


@st.composite
def nested_arrays(draw: st.DrawFn) -> tuple[object, list[int], list[int]]:
    dimensions = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    lower_bounds = draw(
        st.one_of(
            st.just([1] * len(dimensions)),
            st.lists(st.integers(-5, 5), min_size=len(dimensions), max_size=len(dimensions)),
        )
    )

    def build(level: int) -> object:
        if level == len(dimensions):
            return draw(st.none() | element_text)
        return [build(level + 1) for _ in range(dimensions[level])]

    return build(0), dimensions, lower_bounds


def flatten(node: object) -> list[str | None]:
    if isinstance(node, list):
        return [item for child in node for item in flatten(child)]
    assert node is None or isinstance(node, str)
    return [node]


@given(nested_arrays())
def test_text_arrays_round_trip_with_nulls_quotes_and_bounds(
    case: tuple[object, list[int], list[int]],
) -> None:
    nested, dimensions, lower_bounds = case
    text = render_array(nested, lower_bounds, dimensions)
    value = to_value("_text", text)
    expected = [
        Value(null=Value.NULL) if item is None else Value(string=item) for item in flatten(nested)
    ]
    assert list(value.array.elements) == expected
    assert list(value.array.dimensions) == dimensions
    assert list(value.array.lower_bounds) == lower_bounds
    assert value.array.element_type == "text"
    assert to_text(value) == text


@given(st.lists(st.one_of(st.none(), st.floats()), min_size=1, max_size=20))
def test_float_arrays_round_trip(numbers: list[float | None]) -> None:
    text = "{" + ",".join("NULL" if n is None else render_float(n) for n in numbers) + "}"
    value = to_value("_float8", text)

    def element(number: float | None) -> stream_pb2.Value:
        if number is None:
            return Value(null=Value.NULL)
        # PostgreSQL has one NaN, without sign or payload.
        return Value(double=math.nan if math.isnan(number) else number)

    expected = Value(
        array=stream_pb2.Array(
            elements=[element(n) for n in numbers],
            dimensions=[len(numbers)],
            lower_bounds=[1],
            element_type="float8",
        )
    )
    assert same(value, expected)
    assert to_text(value) == text


@given(
    st.lists(
        st.one_of(st.none(), st.integers(FIRST_DAY * USECS_PER_DAY, LAST_TIMESTAMP_MICROS)),
        min_size=1,
        max_size=10,
    )
)
def test_timestamptz_arrays_round_trip(instants: list[int | None]) -> None:
    text = (
        "{"
        + ",".join(render_element(None if m is None else render_timestamp(m, 0)) for m in instants)
        + "}"
    )
    value = to_value("_timestamptz", text)
    micros = [
        None if e.WhichOneof("kind") == "null" else e.timestamp.micros for e in value.array.elements
    ]
    assert micros == instants
    assert to_text(value) == text
