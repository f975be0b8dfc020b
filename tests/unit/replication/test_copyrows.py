"""COPY fields straight from rows: byte for byte the codec's text, escaped; shapes still checked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.errors import CodecError, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.copyrows import RowText, encode_value, row_text
from pgshovel.source import Column, TableShape, copytext
from pgshovel.stream import codec

Value = stream_pb2.Value

TYPES = {
    "int8": "bigint",
    "int4": "integer",
    "text": "text",
    "numeric": "numeric",
    "timestamptz": "timestamp with time zone",
    "timestamp": "timestamp without time zone",
    "jsonb": "jsonb",
    "uuid": "uuid",
    "bytea": "bytea",
    "bool": "boolean",
    "float8": "double precision",
    "date": "date",
}
TABLE = TableShape(
    "public",
    "t",
    tuple(
        Column(f"c {type_name}", sql_type, type_name, index == 0, index + 1)
        for index, (type_name, sql_type) in enumerate(TYPES.items())
    ),
    ("c int8", "c text"),
)


def general(value: stream_pb2.Value) -> str:
    """The reference: the codec's text, then COPY escaping."""
    return copytext.encode_value(codec.to_text(value))


def value(**kind: object) -> stream_pb2.Value:
    return Value(**kind)  # type: ignore[arg-type]


def timestamp(micros: int, with_zone: bool, infinity: int) -> stream_pb2.Value:
    stamp = stream_pb2.Timestamp(micros=micros, with_zone=with_zone)
    stamp.infinity = infinity  # type: ignore[assignment]
    return value(timestamp=stamp)


ANY_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", "a\tb", "a\nb", "a\rb", "back\\slash", "\x0b\x0c", "\u00a0", "\u2028", "é\\t"]
)
NATURAL = {
    "int8": st.integers(-(2**63), 2**63 - 1).map(lambda n: value(int64=n)),
    "int4": st.integers(-(2**31), 2**31 - 1).map(lambda n: value(int64=n)),
    "text": ANY_TEXT.map(lambda text: value(string=text)),
    "numeric": st.sampled_from(
        ["0", "1.50", "-0.001", "NaN", "-Infinity", "1e5", "", "1.", "x"]
    ).map(lambda text: value(decimal=text)),
    "timestamptz": st.builds(
        timestamp,
        st.integers(-(2**62), 2**63 - 1) | st.integers(-(10**13), 10**13),
        st.booleans(),
        st.sampled_from([0, 0, 1, 2]),
    ),
    "timestamp": st.builds(
        timestamp, st.integers(-(10**16), 10**16), st.booleans(), st.sampled_from([0, 1, 2])
    ),
    "jsonb": ANY_TEXT.map(lambda text: value(json=text)),
    "uuid": st.binary(min_size=15, max_size=17).map(lambda raw: value(uuid=raw)),
    "bytea": st.binary(max_size=6).map(lambda raw: value(bytes=raw)),
    "bool": st.booleans().map(lambda flag: value(bool=flag)),
    "float8": st.floats(allow_nan=True).map(lambda number: value(double=number)),
    "date": st.integers(-(10**7), 10**7).map(lambda days: value(date=stream_pb2.Date(days=days))),
}
# What else a column may carry: NULL, text of a type without a native kind, another kind,
# a value with no kind at all (damaged).
OTHERS = st.sampled_from(
    [
        value(null=Value.NULL),
        value(other=stream_pb2.Other(type="timestamptz", text="294277-01-01 00:00:00+00")),
        value(string="7"),
        value(int64=0),
        value(),
    ]
)


def column_values(type_name: str) -> st.SearchStrategy[stream_pb2.Value]:
    return NATURAL[type_name] | OTHERS


ROWS = st.tuples(*(column_values(type_name) for type_name in TYPES))


def make_row(
    values: tuple[stream_pb2.Value, ...], names: list[str] | None = None
) -> stream_pb2.Row:
    row = stream_pb2.Row()
    for name, item in zip(names or TABLE.column_names, values, strict=True):
        row.columns.add(name=name).value.CopyFrom(item)
    return row


def expected(values: tuple[stream_pb2.Value, ...]) -> list[str] | None:
    try:
        return [general(item) for item in values]
    except CodecError:
        return None


@given(ROWS)
def test_fields_and_keys_are_the_codecs_text_escaped(values: tuple[stream_pb2.Value, ...]) -> None:
    rows = RowText(TABLE)
    fields = expected(values)
    key_fields = expected((values[0], values[2]))
    row = make_row(values)
    if key_fields is None:
        with pytest.raises(CodecError):
            rows.new_key(row)
        return
    key, pending = rows.new_key(row)
    assert key == tuple(key_fields)
    assert rows.old_key(row) == key
    if fields is None:
        with pytest.raises(CodecError):
            rows.fields(pending)
    else:
        assert rows.fields(pending) == "\t".join(fields)


@given(ROWS, st.randoms(use_true_random=False))
def test_a_row_in_another_column_order_reads_the_same(
    values: tuple[stream_pb2.Value, ...], shuffler: object
) -> None:
    names = list(TABLE.column_names)
    order = list(range(len(names)))
    shuffler.shuffle(order)  # type: ignore[attr-defined]
    shuffled = make_row(tuple(values[i] for i in order), [names[i] for i in order])
    rows = RowText(TABLE)
    fields = expected(values)
    if fields is None:
        with pytest.raises(CodecError):  # when the key or when the row is read
            _key, pending = rows.new_key(shuffled)
            rows.fields(pending)
        return
    key, pending = rows.new_key(shuffled)
    assert key == (fields[0], fields[2])
    assert rows.fields(pending) == "\t".join(fields)


@pytest.mark.parametrize("type_name", [*TYPES, "interval", "_int4", "point"])
def test_each_type_has_an_encoder_that_agrees_with_the_codec(type_name: str) -> None:
    table = TableShape("public", "one", (Column("v", type_name, type_name, False, 1),), ())
    rows = row_text(table)
    samples = [value(null=Value.NULL), value(other=stream_pb2.Other(type="x", text="a\tb"))]
    for item in samples:
        assert rows.fields(make_row((item,), ["v"])) == general(item)


SHORT = TableShape(
    "public",
    "s",
    (Column("id", "integer", "int4", True, 1), Column("b", "text", "text", False, 2)),
    ("id",),
)


def test_a_row_that_lacks_a_column_is_refused_and_an_old_row_needs_only_its_key() -> None:
    rows = RowText(SHORT)
    only_key = make_row((value(int64=7),), ["id"])
    with pytest.raises(SchemaError, match=r"new row .* lacks columns \['b'\]"):
        rows.new_key(only_key)
    assert rows.old_key(only_key) == ("7",)
    with pytest.raises(SchemaError, match=r"old row .* lacks columns \['id'\]"):
        rows.old_key(make_row((value(string="x"),), ["b"]))


def test_a_column_the_shape_does_not_know_is_refused_on_either_side() -> None:
    rows = RowText(SHORT)
    extra = make_row((value(int64=1), value(string="x"), value(string="lost?")), ["id", "b", "c"])
    with pytest.raises(SchemaError, match=r"has columns \['c'\]"):
        rows.new_key(extra)
    with pytest.raises(SchemaError, match=r"has columns \['c'\]"):
        rows.old_key(extra)
    renamed = make_row((value(int64=1), value(string="x")), ["id", "c"])
    with pytest.raises(SchemaError, match=r"lacks columns \['b'\]"):
        rows.new_key(renamed)


def test_a_column_given_twice_is_refused() -> None:
    twice = make_row((value(int64=1), value(string="x"), value(string="y")), ["id", "b", "b"])
    with pytest.raises(SchemaError, match=r"has columns \['b'\] more than once"):
        RowText(SHORT).new_key(twice)


def test_a_deleted_row_is_its_key_and_nulls() -> None:
    rows = RowText(TABLE)
    fields = rows.deleted_fields(("1", "a\\tb")).split("\t")
    assert fields[0] == "1" and fields[2] == "a\\tb"
    assert [field for index, field in enumerate(fields) if index not in (0, 2)] == ["\\N"] * 10


def test_encode_value_is_the_general_path() -> None:
    assert encode_value(value(string="a\tb")) == "a\\tb"
    assert encode_value(value(null=Value.NULL)) == "\\N"
