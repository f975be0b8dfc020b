"""The codec on arrays: shape, lower bounds, NULLs, quoting, unknown element types."""

from __future__ import annotations

import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import to_text, to_value

Value = stream_pb2.Value
NULL = Value(null=Value.NULL)


def array(
    element_type: str,
    elements: list[stream_pb2.Value],
    dimensions: list[int],
    lower_bounds: list[int] | None = None,
) -> stream_pb2.Value:
    if lower_bounds is None:
        lower_bounds = [1] * len(dimensions)
    return Value(
        array=stream_pb2.Array(
            elements=elements,
            dimensions=dimensions,
            lower_bounds=lower_bounds,
            element_type=element_type,
        )
    )


def ints(*numbers: int | None) -> list[stream_pb2.Value]:
    return [NULL if n is None else Value(int64=n) for n in numbers]


def strings(*texts: str | None) -> list[stream_pb2.Value]:
    return [NULL if t is None else Value(string=t) for t in texts]


def other(type_name: str, text: str) -> stream_pb2.Value:
    return Value(other=stream_pb2.Other(type=type_name, text=text))


# Texts exactly as PostgreSQL 15 prints them.
CANONICAL = [
    ("_int4", "{}", array("int4", [], [], [])),
    ("_int4", "{1,2,3}", array("int4", ints(1, 2, 3), [3])),
    ("_int4", "{1,NULL,3}", array("int4", ints(1, None, 3), [3])),
    ("_int4", "{{1,NULL},{3,4}}", array("int4", ints(1, None, 3, 4), [2, 2])),
    ("_int4", "{{{1},{2}},{{3},{4}}}", array("int4", ints(1, 2, 3, 4), [2, 2, 1])),
    ("_int4", "[0:1]={1,2}", array("int4", ints(1, 2), [2], [0])),
    ("_int4", "[2:3][-1:0]={{1,2},{3,4}}", array("int4", ints(1, 2, 3, 4), [2, 2], [2, -1])),
    ("_int8", "{NULL}", array("int8", ints(None), [1])),
    (
        "_text",
        '{"","NULL","a b","a\\"b","a\\\\b","{",é," x","a,b"}',
        array("text", strings("", "NULL", "a b", 'a"b', "a\\b", "{", "é", " x", "a,b"), [9]),
    ),
    ("_text", '{"null","Null",NULL}', array("text", strings("null", "Null", None), [3])),
    (
        "_text",
        '{"line\nbreak","tab\there"}',
        array("text", strings("line\nbreak", "tab\there"), [2]),
    ),
    ("_bpchar", '{"a  "}', array("bpchar", strings("a  "), [1])),
    (
        "_numeric",
        "{1.50,NaN,-Infinity,NULL}",
        array(
            "numeric",
            [Value(decimal="1.50"), Value(decimal="NaN"), Value(decimal="-Infinity"), NULL],
            [4],
        ),
    ),
    (
        "_timestamptz",
        '{"0044-03-15 00:00:00+00 BC",infinity,NULL}',
        array(
            "timestamptz",
            [
                Value(timestamp=stream_pb2.Timestamp(micros=-63517824000000000, with_zone=True)),
                Value(timestamp=stream_pb2.Timestamp(with_zone=True, infinity=stream_pb2.POSITIVE)),
                NULL,
            ],
            [3],
        ),
    ),
    (
        "_float8",
        "{NaN,-Infinity,-0,1e+15}",
        array(
            "float8",
            [
                Value(double=float("nan")),
                Value(double=float("-inf")),
                Value(double=-0.0),
                Value(double=1e15),
            ],
            [4],
        ),
    ),
    (
        "_bytea",
        '{"\\\\x00ff",NULL}',
        array("bytea", [Value(bytes=b"\x00\xff"), NULL], [2]),
    ),
    (
        "_inet",
        "{10.0.0.1,NULL}",
        array("inet", [other("inet", "10.0.0.1"), NULL], [2]),
    ),
    (
        "_mood",
        "{{happy,sad},{ok,NULL}}",
        array(
            "mood",
            [other("mood", "happy"), other("mood", "sad"), other("mood", "ok"), NULL],
            [2, 2],
        ),
    ),
    (
        "_pair",
        '{"(1,\\"a b\\")"}',
        array("pair", [other("pair", '(1,"a b")')], [1]),
    ),
    ("_box", "{(1,1),(0,0);(2,2),(1,1)}", other("_box", "{(1,1),(0,0);(2,2),(1,1)}")),
]


def _same(left: stream_pb2.Value, right: stream_pb2.Value) -> bool:
    # NaN never equals itself; compare the wire bytes instead.
    return left.SerializeToString(deterministic=True) == right.SerializeToString(deterministic=True)


@pytest.mark.parametrize(("type_name", "text", "expected"), CANONICAL)
def test_array_text_becomes_the_expected_value(
    type_name: str, text: str, expected: stream_pb2.Value
) -> None:
    assert _same(to_value(type_name, text), expected)


@pytest.mark.parametrize(("type_name", "text", "expected"), CANONICAL)
def test_array_value_prints_postgresql_text(
    type_name: str, text: str, expected: stream_pb2.Value
) -> None:
    assert to_text(expected) == text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("{ 1 , 2 }", "{1,2}"),
        ("{{ 1 } , { 2 }}", "{{1},{2}}"),
        ("[1:2]={1,2}", "{1,2}"),
        ("[2]={1,2}", "{1,2}"),
        ('  {"a" , b c }  ', '{a,"b c"}'),
        ("{a\\ ,b}", '{"a ",b}'),
        ("{\\NULL}", '{"NULL"}'),
        ("{nULl}", "{NULL}"),
        ('{"a\\b"}', "{ab}"),
    ],
)
def test_array_input_forms_postgresql_accepts_are_read_like_postgresql(
    text: str, canonical: str
) -> None:
    assert to_text(to_value("_text", text)) == canonical


def test_unknown_array_type_that_is_no_array_literal_travels_whole() -> None:
    value = to_value("_weird", "not an array")
    assert value.other == stream_pb2.Other(type="_weird", text="not an array")
    assert to_text(value) == "not an array"


def test_big_array_keeps_every_element_in_order() -> None:
    numbers = list(range(-5000, 5000))
    text = "{" + ",".join(map(str, numbers)) + "}"
    value = to_value("_int8", text)
    assert [element.int64 for element in value.array.elements] == numbers
    assert to_text(value) == text
