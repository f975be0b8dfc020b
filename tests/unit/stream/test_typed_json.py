"""The typed JSON mapping: PostgreSQL text -> protocol value -> JSON, type by type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import encoder_for, to_value
from pgshovel.stream.typed_json import RawJSON, dumps, key_object, row_object, to_json


@pytest.mark.parametrize(
    ("type_name", "text", "expected"),
    [
        ("int4", "50001", 50001),
        ("int8", "-9223372036854775808", -9223372036854775808),
        ("numeric", "1.50", "1.50"),
        ("numeric", "NaN", "NaN"),
        ("numeric", "1234567890123456789012345.000000001", "1234567890123456789012345.000000001"),
        ("bool", "t", True),
        ("bool", "f", False),
        ("float8", "1.5", 1.5),
        ("float8", "NaN", "NaN"),
        ("float8", "-Infinity", "-Infinity"),
        ("text", 'it\'s "quoted" é', 'it\'s "quoted" é'),
        ("timestamptz", "2024-01-02 03:04:05.5+00", "2024-01-02T03:04:05.5Z"),
        ("timestamptz", "2024-01-02 03:04:05+00", "2024-01-02T03:04:05Z"),
        ("timestamp", "2024-01-02 03:04:05.000123", "2024-01-02T03:04:05.000123"),
        ("timestamp", "infinity", "infinity"),
        ("timestamptz", "-infinity", "-infinity"),
        ("timestamp", "0044-03-15 12:00:00 BC", "-0043-03-15T12:00:00"),
        ("timestamp", "10000-01-01 00:00:00", "+10000-01-01T00:00:00"),
        ("date", "0001-01-01 BC", "0000-01-01"),
        ("date", "1999-12-31", "1999-12-31"),
        ("date", "infinity", "infinity"),
        ("time", "24:00:00", "24:00:00"),
        ("time", "13:45:00.25", "13:45:00.25"),
        ("timetz", "13:45:00+02", "13:45:00+02:00"),
        ("timetz", "13:45:00-05:30", "13:45:00-05:30"),
        ("interval", "1 year 2 mons 3 days 04:05:06.5", "P1Y2M3DT4H5M6.5S"),
        ("interval", "00:00:00", "PT0S"),
        ("interval", "-00:00:01.5", "PT-1.5S"),
        ("interval", "-1 years -2 mons +3 days -04:05:06", "P-1Y-2M3DT-4H-5M-6S"),
        ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ("bytea", "\\x00ff10", "AP8Q"),
        ("_int4", "{{1,2},{3,NULL}}", [[1, 2], [3, None]]),
        ("_text", "{}", []),
        ("_numeric", "{1.10,NaN}", ["1.10", "NaN"]),
        ("inet", "10.0.0.1/8", "10.0.0.1/8"),
    ],
)
def test_values_map_to_typed_json(type_name: str, text: str, expected: object) -> None:
    assert to_json(to_value(type_name, text)) == expected


def test_null_is_null() -> None:
    assert to_json(to_value("int4", None)) is None


def test_json_documents_are_embedded_verbatim() -> None:
    text = '{"n": 12345678901234567890.000001, "a": [1, 2.50]}'
    value = to_json(to_value("json", text))
    assert value == RawJSON(text)
    out = dumps({"doc": value, "after": 1})
    assert out == '{"doc":' + text + ',"after":1}'
    assert json.loads(out)["doc"]["a"] == [1, 2.5]


def test_dumps_is_compact_ordered_and_keeps_unicode() -> None:
    assert dumps({"b": 1, "a": ["é", None, True]}) == '{"b":1,"a":["é",null,true]}'


def test_dumps_refuses_a_float_json_cannot_hold() -> None:
    with pytest.raises(ValueError):
        dumps({"x": float("nan")})


def _row(**values: tuple[str, str | None]) -> stream_pb2.Row:
    return stream_pb2.Row(
        columns=[
            stream_pb2.Column(name=name, value=to_value(type_name, text))
            for name, (type_name, text) in values.items()
        ]
    )


def test_rows_keep_column_order_and_keys_key_order() -> None:
    row = _row(b=("int4", "2"), a=("text", "x"), c=("int4", None))
    assert dumps(row_object(row.columns)) == '{"b":2,"a":"x","c":null}'
    assert dumps(key_object(row, ["c", "b"])) == '{"c":null,"b":2}'
    with pytest.raises(KeyError):
        key_object(row, ["missing"])


@pytest.mark.parametrize(
    "text",
    ['{"q": "a\\"b\\\\c", "u": "é\\u00e9"}', "[1, 2.50e3, null]", '"\\u0000x"', "  7  "],
)
def test_json_with_escapes_is_embedded_verbatim(text: str) -> None:
    out = dumps([RawJSON(text), "\\u0000 looks like a mark", {"k": RawJSON(text)}])
    assert out == f'[{text.strip()},"\\\\u0000 looks like a mark",{{"k":{text.strip()}}}]'
    assert json.loads(out)[0] == json.loads(text)


@pytest.mark.parametrize(
    ("type_name", "text", "expected"),
    [
        # Past 294247-01-10 04:00:54.775807 the protocol carries the text; JSON keeps its form.
        ("timestamptz", "294276-12-31 23:59:59.999999+00", "+294276-12-31T23:59:59.999999Z"),
        ("timestamp", "294276-12-31 23:59:59.999999", "+294276-12-31T23:59:59.999999"),
        ("timestamptz", "294247-01-10 04:00:54.775808+00", "+294247-01-10T04:00:54.775808Z"),
        ("timestamptz", "294247-01-10 04:00:54.775807+00", "+294247-01-10T04:00:54.775807Z"),
        ("timestamp", "4714-11-24 00:00:00 BC", "-4713-11-24T00:00:00"),
        ("timestamptz", "4714-11-24 00:00:00+00 BC", "-4713-11-24T00:00:00Z"),
        ("date", "5874897-12-31", "+5874897-12-31"),
        ("date", "4714-11-24 BC", "-4713-11-24"),
        ("date", "0001-01-01", "0001-01-01"),
        (
            "_timestamptz",
            '{"294276-12-31 23:59:59+00",infinity}',
            ["+294276-12-31T23:59:59Z", "infinity"],
        ),
    ],
)
def test_the_whole_postgresql_range_takes_the_iso_form(
    type_name: str, text: str, expected: object
) -> None:
    assert to_json(to_value(type_name, text)) == expected
    encoded = stream_pb2.Value.FromString(encoder_for(type_name)(text))
    assert to_json(encoded) == expected, "the relay's encoder: the same JSON"


def test_a_json_null_document_and_sql_null_are_the_mapping_s_one_ambiguity() -> None:
    """Documented in the README's JSON mapping; the protocol value keeps them apart."""
    document, missing = to_value("jsonb", "null"), to_value("jsonb", None)
    assert document != missing
    assert dumps([to_json(document), to_json(missing)]) == "[null,null]"
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    assert "The mapping's one ambiguity: a `json` or `jsonb` value that is the JSON" in readme
