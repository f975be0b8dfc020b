"""The codec on scalar types: PostgreSQL 15's exact output text <-> the expected Value."""

from __future__ import annotations

import math

import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import to_text, to_value

Value = stream_pb2.Value

# (type name, text exactly as PostgreSQL 15 prints it under the capture settings,
#  the Value it must become)
SCALARS = [
    ("int2", "-32768", Value(int64=-32768)),
    ("int2", "32767", Value(int64=32767)),
    ("int4", "2147483647", Value(int64=2147483647)),
    ("int4", "0", Value(int64=0)),
    ("int8", "-9223372036854775808", Value(int64=-(2**63))),
    ("int8", "9223372036854775807", Value(int64=2**63 - 1)),
    ("oid", "4294967295", Value(int64=4294967295)),
    ("numeric", "1.50", Value(decimal="1.50")),
    ("numeric", "-0.000100", Value(decimal="-0.000100")),
    ("numeric", "0", Value(decimal="0")),
    ("numeric", "0.00000000000000000001", Value(decimal="0.00000000000000000001")),
    ("numeric", "NaN", Value(decimal="NaN")),
    ("numeric", "Infinity", Value(decimal="Infinity")),
    ("numeric", "-Infinity", Value(decimal="-Infinity")),
    ("numeric", "9" * 1000 + "." + "1" * 1000, Value(decimal="9" * 1000 + "." + "1" * 1000)),
    ("float8", "-123.456", Value(double=-123.456)),
    ("float8", "0.30000000000000004", Value(double=0.1 + 0.2)),
    ("float8", "1e+16", Value(double=1e16)),
    ("float8", "1e+15", Value(double=1e15)),
    ("float8", "100000000000000", Value(double=1e14)),
    ("float8", "123456789012345.6", Value(double=123456789012345.6)),
    ("float8", "1.2345678901234568e+17", Value(double=1.2345678901234568e17)),
    ("float8", "0.0001", Value(double=0.0001)),
    ("float8", "1e-05", Value(double=1e-05)),
    ("float8", "1.5e+300", Value(double=1.5e300)),
    ("float8", "5e-324", Value(double=5e-324)),
    ("float8", "1.7976931348623157e+308", Value(double=1.7976931348623157e308)),
    ("float8", "2.2250738585072014e-308", Value(double=2.2250738585072014e-308)),
    # Halfway to a neighbour: Python's repr says 1e+23, PostgreSQL never does.
    ("float8", "9.999999999999999e+22", Value(double=1e23)),
    ("float8", "4.3555874920897984e+16", Value(double=43555874920897984.0)),
    ("float8", "Infinity", Value(double=math.inf)),
    ("float8", "-Infinity", Value(double=-math.inf)),
    ("float8", "0", Value(double=0.0)),
    ("float4", "0.1", Value(double=0.1)),
    ("float4", "3.4028235e+38", Value(double=3.4028235e38)),
    ("float4", "1.1754944e-38", Value(double=1.1754944e-38)),
    ("float4", "1e-45", Value(double=1e-45)),
    ("float4", "123456.7", Value(double=123456.7)),
    ("bool", "t", Value(bool=True)),
    ("bool", "f", Value(bool=False)),
    ("text", "", Value(string="")),
    ("text", 'it\'s \\ "quoted"\nand é ✓', Value(string='it\'s \\ "quoted"\nand é ✓')),
    ("varchar", "é", Value(string="é")),
    ("bpchar", "a  ", Value(string="a  ")),
    ("name", "pg_class", Value(string="pg_class")),
    ("char", "x", Value(string="x")),
    ("bytea", "\\x", Value(bytes=b"")),
    ("bytea", "\\x00ff10", Value(bytes=b"\x00\xff\x10")),
    (
        "uuid",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        Value(uuid=bytes.fromhex("a0eebc999c0b4ef8bb6d6bb9bd380a11")),
    ),
    ("json", '{ "a":1, "a":2 }', Value(json='{ "a":1, "a":2 }')),
    ("jsonb", '{"a": [1, 2], "b": 1}', Value(json='{"a": [1, 2], "b": 1}')),
    ("inet", "192.168.0.1/24", Value(other=stream_pb2.Other(type="inet", text="192.168.0.1/24"))),
    ("mood", "happy", Value(other=stream_pb2.Other(type="mood", text="happy"))),
    ("money", "$1,000.00", Value(other=stream_pb2.Other(type="money", text="$1,000.00"))),
    ("int4range", "[1,5)", Value(other=stream_pb2.Other(type="int4range", text="[1,5)"))),
    ("point", "(1,2)", Value(other=stream_pb2.Other(type="point", text="(1,2)"))),
]


@pytest.mark.parametrize(("type_name", "text", "expected"), SCALARS)
def test_scalar_text_becomes_the_expected_value(
    type_name: str, text: str, expected: stream_pb2.Value
) -> None:
    assert to_value(type_name, text) == expected


@pytest.mark.parametrize(("type_name", "text", "expected"), SCALARS)
def test_scalar_value_prints_postgresql_text(
    type_name: str, text: str, expected: stream_pb2.Value
) -> None:
    assert to_text(expected) == text


@pytest.mark.parametrize("type_name", ["int4", "text", "timestamptz", "_int4", "inet"])
def test_null_is_null_for_every_type(type_name: str) -> None:
    value = to_value(type_name, None)
    assert value.WhichOneof("kind") == "null"
    assert to_text(value) is None


@pytest.mark.parametrize("type_name", ["float4", "float8"])
def test_nan_stays_nan(type_name: str) -> None:
    value = to_value(type_name, "NaN")
    assert math.isnan(value.double)
    assert to_text(value) == "NaN"


def test_negative_zero_keeps_its_sign() -> None:
    value = to_value("float8", "-0")
    assert math.copysign(1.0, value.double) == -1.0
    assert to_text(value) == "-0"


def test_float4_is_never_narrowed_to_single_precision() -> None:
    # 16777217 is not a float4; the double carries exactly what the text says.
    assert to_value("float8", "16777217").double == 16777217.0
    assert to_value("float4", "0.1").double == 0.1


def test_uuid_in_other_spellings_is_read() -> None:
    expected = bytes.fromhex("a0eebc999c0b4ef8bb6d6bb9bd380a11")
    assert to_value("uuid", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11").uuid == expected
    assert to_value("uuid", "{a0eebc999c0b4ef8bb6d6bb9bd380a11}").uuid == expected
