"""The table formats' fold types only the rows that survive, and gets what typing every change gets.

``EffectBuilder`` keeps a row as the stream's row until the micro-batch ends and
then types the survivors a column at a time (``_arrow.column_values``). The
reference here is the plain fold it replaced: every change typed value by value
(``mutations.to_change`` with ``_arrow.arrow_value``), last change per key wins.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import CodecError, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.changes import Operation, key_of
from pgshovel.replication.mutations import key_text, to_change
from pgshovel.replication.provenance import stamp_of
from pgshovel.replication.targets import _arrow
from pgshovel.replication.targets._tablefmt_effects import EffectBuilder
from pgshovel.source import Column, TableShape, cast_is_exact
from pgshovel.stream import codec
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import plan_micro_batch
from tests._positions import after
from tests.unit.stream.test_codec_encode import EDGES
from tests.unit.stream.test_codec_fill import SAMPLES

Op = stream_pb2.Mutation

SHAPE = TableShape(
    "public",
    "t",
    (
        Column("a", "integer", "int4", not_null=True),
        Column("note", "text", "text"),
        Column("b", "text", "text", not_null=True),
        Column("price", "numeric(12,2)", "numeric"),
        Column("at", "timestamp with time zone", "timestamptz"),
    ),
    ("a", "b"),
)


def _columns_of(type_name: str) -> list[Column]:
    if type_name == "numeric":
        return [
            Column("n", sql, "numeric") for sql in ("numeric", "numeric(12,2)", "numeric(40,2)")
        ]
    return [Column("v", type_name or "unknown", type_name)]


def _values(type_name: str, text: str) -> list[stream_pb2.Value]:
    value = stream_pb2.Value()
    codec.filler_for(type_name)(value, text)
    other = stream_pb2.Value(string="not of the column's kind")
    return [value, stream_pb2.Value(null=stream_pb2.Value.NULL), other, value]


@pytest.mark.parametrize(("type_name", "text"), SAMPLES + EDGES)
def test_column_values_reads_what_arrow_value_reads(type_name: str, text: str) -> None:
    values = _values(type_name, text)
    for column in _columns_of(type_name):
        try:
            expected: Any = [_arrow.arrow_value(column, value) for value in values]
        except CodecError as error:
            with pytest.raises(CodecError) as raised:
                _arrow.column_values(column, values)
            assert str(raised.value) == str(error)
            continue
        assert repr(_arrow.column_values(column, values)) == repr(expected)  # NaN too


def _row(message: stream_pb2.Row, values: dict[str, Any], order: list[str]) -> None:
    for name in order:
        value = values[name]
        column = message.columns.add(name=name)
        if value is None:
            column.value.null = stream_pb2.Value.NULL
        elif name == "a":
            column.value.int64 = value
        elif name == "price":
            column.value.decimal = value
        elif name == "at":
            column.value.timestamp.micros = value
        else:
            column.value.string = value


_NAMES = [column.name for column in SHAPE.columns]
keys = st.tuples(st.integers(0, 4), st.sampled_from(["x", "y"]))
images = st.fixed_dictionaries(
    {
        "note": st.one_of(st.none(), st.text(max_size=3)),
        "price": st.one_of(st.none(), st.sampled_from(["1.50", "-2.00", "12.34"])),
        "at": st.one_of(st.none(), st.integers(-(10**12), 10**12)),
    }
)
# (operation, old key, new key, the other values, new row's column order reversed?,
#  old row holding every column?, provenance?)
changes = st.tuples(
    st.sampled_from(["insert", "update", "delete", "truncate"]),
    keys,
    keys,
    images,
    st.booleans(),
    st.booleans(),
    st.booleans(),
)


def _mutation(change: tuple[Any, ...], txid: int) -> stream_pb2.Mutation:
    kind, old_key, new_key, other, reversed_order, full_old, provenance = change
    operation = {"insert": Op.INSERT, "update": Op.UPDATE, "delete": Op.DELETE}.get(kind)
    message = Op(schema="public", table="t", transaction=txid, timestamp=txid * 10)
    if operation is None:
        message.operation = Op.TRUNCATE
        return message
    message.operation = operation
    if provenance:
        message.provenance.application_name = f"app {txid}"
    if kind != "insert":
        old = {"a": old_key[0], "b": old_key[1], **other}
        _row(message.old, old, _NAMES if full_old else ["a", "b"])
    if kind != "delete":
        new = {"a": new_key[0], "b": new_key[1], **other}
        _row(message.new, new, _NAMES[::-1] if reversed_order else _NAMES)
    return message


def _reference(mutations: list[stream_pb2.Mutation]) -> tuple[bool, list[tuple[Any, ...]]]:
    """The fold that typed every change: (truncated, [(key, row or None)] in last-change order)."""
    rows: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
    truncated = False
    for mutation in mutations:
        change = to_change(mutation, SHAPE, _arrow.arrow_value)
        if change.operation is Operation.TRUNCATE:
            truncated = True
            rows.clear()
            continue
        if change.old is not None:
            old_key = key_of(change.old, SHAPE.key_positions)
            rows.pop(old_key, None)
            rows[old_key] = None
        if change.new is not None:
            new_key = key_of(change.new, SHAPE.key_positions)
            rows.pop(new_key, None)
            stamp = stamp_of(mutation)
            rows[new_key] = (
                *change.new,
                mutation.transaction,
                7,
                mutation.timestamp,
                None if stamp is None else stamp._asdict(),
            )
    return truncated, list(rows.items())


def _plan(mutations: list[stream_pb2.Mutation]) -> Any:
    batch = CommittedBatch(
        node=b"n" * 16,
        batch_id=7,
        begin=stream_pb2.Begin(),
        mutations=tuple(mutations),
        position=after(7),
        markers=(),
    )
    return plan_micro_batch([batch], (SHAPE,), (), can_alter_type=cast_is_exact, key_text=key_text)


@settings(deadline=None, max_examples=300)
@given(st.lists(changes, max_size=25))
def test_the_fold_keeps_the_last_change_per_key_typed_as_every_change_was(
    drawn: list[tuple[Any, ...]],
) -> None:
    mutations = [_mutation(change, 100 + number) for number, change in enumerate(drawn)]
    builder = EffectBuilder("delta")
    builder.add(_plan(mutations))
    truncated, expected = _reference(mutations)
    effect = builder.effects.get(SHAPE.identity)
    if effect is None:
        assert not mutations
        return
    assert effect.truncate == truncated
    assert list(effect.typed().items()) == expected
    table = effect.table()
    assert table.num_rows == len(expected)
    assert table.column("_pgshovel_deleted").to_pylist() == [row is None for _, row in expected]


def test_a_row_that_lacks_a_column_stops_the_fold_naming_table_and_columns() -> None:
    message = Op(schema="public", table="t", operation=Op.INSERT, transaction=5)
    _row(message.new, {"a": 1, "b": "x", "note": None, "price": None}, ["a", "b", "note", "price"])
    with pytest.raises(SchemaError, match=r"new row of a mutation on 'public.t' lacks .*'at'"):
        EffectBuilder("delta").add(_plan([message]))


def test_a_value_a_table_format_cannot_hold_stops_only_if_it_survives() -> None:
    """A NaN numeric(12,2) overwritten in the same micro-batch is never typed; one that
    survives stops the fold naming the column."""
    nan = _mutation(
        (
            "insert",
            (1, "x"),
            (1, "x"),
            {"note": None, "price": "NaN", "at": None},
            False,
            False,
            False,
        ),
        5,
    )
    fixed = _mutation(
        (
            "update",
            (1, "x"),
            (1, "x"),
            {"note": None, "price": "1.00", "at": None},
            False,
            False,
            False,
        ),
        6,
    )
    builder = EffectBuilder("delta")
    builder.add(_plan([nan, fixed]))
    assert builder.effects[SHAPE.identity].table().column("price").to_pylist()[0] is not None
    builder = EffectBuilder("delta")
    builder.add(_plan([nan]))
    with pytest.raises(CodecError, match=r"column 'price' \(numeric\(12,2\)\)"):
        builder.effects[SHAPE.identity].table()
