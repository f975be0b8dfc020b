"""Planning a micro-batch: segments split at schema changes, shapes, broken tables, re-copies."""

from __future__ import annotations

from typing import Any

import pytest

from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.source import Column, TableShape, cast_is_exact
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import SchemaStep, Segment, join_parts, plan_micro_batch
from pgshovel.stream.shapes import shape_to_proto
from tests._positions import after

ID = Column("id", "integer", "int4", True, 1)
A = Column("a", "integer", "int4", False, 2)
T = TableShape("public", "t", (ID, A), ("id",), relation=10)
U = TableShape("public", "u", (ID,), ("id",), relation=11)
Kind = stream_pb2.SchemaChange


def mutation(table: str, key: int, operation: int = stream_pb2.Mutation.UPDATE) -> Any:
    message = stream_pb2.Mutation(schema="public", table=table, operation=operation)  # type: ignore[arg-type]
    message.new.columns.add(name="id").value.int64 = key
    return message


def change(kind: int, shape: TableShape | None, name: str = "t", **fields: Any) -> Any:
    fields.setdefault("relation", 10)
    message = stream_pb2.SchemaChange(kind=kind, schema="public", table=name, **fields)  # type: ignore[arg-type]
    if shape is not None:
        message.shape.CopyFrom(shape_to_proto(shape))
    return message


def batch(*items: Any) -> CommittedBatch:
    mutations = [item for item in items if isinstance(item, stream_pb2.Mutation)]
    markers, seen = [], 0
    for item in items:
        if isinstance(item, stream_pb2.Mutation):
            seen += 1
        else:
            markers.append((seen, item))
    return CommittedBatch(
        node=b"n" * 16,
        batch_id=1,
        begin=stream_pb2.Begin(),
        mutations=tuple(mutations),
        position=after(0),
        markers=tuple(markers),
    )


def key_text(row: Any, table: TableShape) -> tuple[str | None, ...] | None:
    return (str(row.columns[0].value.int64),) if row.columns else None


def plan(
    *batches: CommittedBatch, tables: tuple[TableShape, ...] = (T, U), broken: Any = ()
) -> Any:
    return plan_micro_batch(
        batches, tables, broken, can_alter_type=cast_is_exact, key_text=key_text
    )


def test_mutations_before_and_after_a_schema_change_are_applied_with_their_shape() -> None:
    wider = TableShape("public", "t", (ID, Column("a", "bigint", "int8", False, 2)), ("id",), 10)
    result = plan(batch(mutation("t", 1), change(Kind.ALTER, wider), mutation("t", 2)))
    first, step, second = result.steps
    assert isinstance(first, Segment) and first.runs[0].table == T
    assert isinstance(step, SchemaStep) and (step.before, step.after) == (T, wider)
    assert isinstance(second, Segment) and second.runs[0].table == wider
    assert result.tables == (U, wider) or set(result.tables) == {U, wider}
    assert not result.recopy, "int4 -> int8 is replayed exactly"


def test_a_rewrite_or_a_new_table_is_copied_again() -> None:
    result = plan(batch(change(Kind.ALTER, T, rewrites_rows=True)))
    assert [(table.name, reason) for table, reason in result.recopy] == [
        ("t", "a change rewrote existing rows")
    ]
    new = TableShape("public", "n", (ID,), ("id",), relation=12)
    added = plan(batch(change(Kind.ANNOUNCE, new, name="n", relation=12)))
    assert [reason for _, reason in added.recopy] == ["added to the set"]


def test_a_renamed_table_is_found_by_relation() -> None:
    renamed = TableShape("public", "t2", T.columns, T.key, relation=10)
    result = plan(batch(change(Kind.ALTER, renamed, name="t2"), mutation("t2", 5)))
    step = result.steps[0]
    assert isinstance(step, SchemaStep) and step.before == T and step.after == renamed
    assert {table.name for table in result.tables} == {"t2", "u"}


def test_a_broken_table_is_skipped_until_its_capture_is_repaired() -> None:
    result = plan(batch(change(Kind.ALTER, None, problem="column renamed"), mutation("t", 1)))
    assert result.broken == (("public", "t"),) and result.skipped == 1
    repaired = plan(batch(change(Kind.ANNOUNCE, T)), tables=(U,), broken=result.broken)
    assert repaired.broken == () and [r for _, r in repaired.recopy] == ["capture was repaired"]


def test_a_mutation_of_an_unknown_table_is_an_error() -> None:
    with pytest.raises(SchemaError, match="not a table of the set"):
        plan(batch(mutation("ghost", 1)))


def test_changed_keys_and_watermarks_are_noted_per_batch() -> None:
    mark = stream_pb2.Watermark(request="x:low")
    result = plan(
        batch(mutation("t", 1), mark, mutation("u", 2)),
        batch(mutation("t", 3, stream_pb2.Mutation.TRUNCATE)),
    )
    first, second = result.batches
    assert first.keys == {("public", "t"): {("1",)}, ("public", "u"): {("2",)}}
    assert [m.request for m in first.watermarks] == ["x:low"]
    assert second.whole == {("public", "t")}


def test_keys_are_read_only_when_asked_for() -> None:
    read: list[object] = []

    def counting_key_text(row: Any, table: TableShape) -> tuple[str | None, ...] | None:
        read.append(row)
        return key_text(row, table)

    result = plan_micro_batch(
        [batch(mutation("t", 1), mutation("t", 2))],
        (T, U),
        (),
        can_alter_type=cast_is_exact,
        key_text=counting_key_text,
    )
    assert read == []
    assert result.batches[0].keys == {("public", "t"): {("1",), ("2",)}}
    assert result.batches[0].keys is result.batches[0].keys  # read once


def test_parts_of_a_batch_keep_only_the_keys_asked_for_and_join_as_one_batch() -> None:
    low, high = stream_pb2.Watermark(request="x:low"), stream_pb2.Watermark(request="x:high")
    first = plan(batch(mutation("t", 1), mutation("u", 9), low)).batches[0]
    settled = first.settled({("public", "t")})
    assert settled.batch.mutations == () and settled.touched == ()
    assert settled.keys == {("public", "t"): {("1",)}}
    last = plan(batch(mutation("t", 2), mutation("t", 3, stream_pb2.Mutation.TRUNCATE), high))
    joined = join_parts([settled, last.batches[0]], {("public", "t")})
    # Keys before the low watermark count: the batch counts whole.
    assert joined.keys == {("public", "t"): {("1",), ("2",)}}
    assert [m.request for m in joined.watermarks] == ["x:low", "x:high"]
    assert joined.whole == {("public", "t")}
    assert joined.batch is last.batches[0].batch


def test_keys_of_some_tables_read_only_their_rows() -> None:
    read: list[str] = []

    def counting_key_text(row: Any, table: TableShape) -> tuple[str | None, ...] | None:
        read.append(table.name)
        return key_text(row, table)

    result = plan_micro_batch(
        [batch(mutation("t", 1), mutation("u", 2))],
        (T, U),
        (),
        can_alter_type=cast_is_exact,
        key_text=counting_key_text,
    )
    assert result.batches[0].keys_of({("public", "u")}) == {("public", "u"): {("2",)}}
    assert set(read) == {"u"}
    assert result.batches[0].settled(set()).keys == {}


J = TableShape("public", "j", (ID,), ())  # unkeyed


def test_an_unkeyed_table_changes_by_its_mutations_not_by_an_empty_key_set() -> None:
    first_j, second_j = mutation("j", 1), mutation("j", 1, stream_pb2.Mutation.INSERT)
    result = plan(batch(first_j, mutation("t", 2), second_j), tables=(T, J))
    changes = result.batches[0]
    # No key names an unkeyed row: it is not among the keys (an empty set there read as
    # "not changed" and lost the rows written while it was read).
    assert changes.keys == {("public", "t"): {("2",)}}
    assert changes.unkeyed_of({("public", "j"), ("public", "t")}) == {
        ("public", "j"): (first_j, second_j)
    }
    assert changes.unkeyed_of({("public", "t")}) == {}


def test_an_unkeyed_tables_mutations_survive_a_batch_applied_in_parts() -> None:
    early, late = mutation("j", 1), mutation("j", 2, stream_pb2.Mutation.DELETE)
    part = plan(batch(early, mutation("t", 5)), tables=(T, J)).batches[0]
    settled = part.settled({("public", "j")})
    assert settled.unkeyed_of({("public", "j")}) == {("public", "j"): (early,)}
    last = plan(batch(late), tables=(T, J)).batches[0]
    joined = join_parts([settled, last], {("public", "j")})
    assert joined.unkeyed_of({("public", "j")}) == {("public", "j"): (early, late)}
    assert part.settled(set()).unkeyed_of({("public", "j")}) == {}
