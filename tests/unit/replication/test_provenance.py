"""Provenance in the targets: the stamp read from a mutation, the change log column, audit rows."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa

from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import key_text
from pgshovel.replication.provenance import FIELDS, stamp_of
from pgshovel.replication.targets import _parquet_tables
from pgshovel.replication.targets._pgaudit import COLUMNS, audit_rows
from pgshovel.source import Column, TableShape, cast_is_exact
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import Entry, plan_micro_batch
from tests._positions import after

ID = Column("id", "integer", "int4", True, 1)
SUB = Column("sub", "text", "text", True, 2)
NOTE = Column("note", "text", "text", False, 3)
KEYED = TableShape("public", "keyed", (ID, SUB, NOTE), ("id", "sub"), relation=10)
LOOSE = TableShape("public", "loose", (NOTE,), (), relation=11)
NODE = uuid.UUID("12345678-1234-5678-1234-567812345678")
Op = stream_pb2.Mutation

ALICE = stream_pb2.Provenance(
    current_user="alice",
    session_user="app",
    application_name="billing",
    client_addr="10.1.2.3",
    query_id=-4242,
    annotation="req-7\tx",
)


def row(table: TableShape, *values: Any) -> stream_pb2.Row:
    message = stream_pb2.Row()
    for column, value in zip(table.columns, values, strict=True):
        cell = message.columns.add(name=column.name)
        if value is None:
            cell.value.null = stream_pb2.Value.NULL
        elif isinstance(value, int):
            cell.value.int64 = value
        else:
            cell.value.string = value
    return message


def mutation(
    table: TableShape,
    number: int,
    operation: int,
    old: tuple[Any, ...] | None = None,
    new: tuple[Any, ...] | None = None,
    provenance: stream_pb2.Provenance | None = None,
) -> stream_pb2.Mutation:
    message = stream_pb2.Mutation(
        id=number,
        schema=table.schema,
        table=table.name,
        operation=operation,  # type: ignore[arg-type]
        transaction=900 + number,
        timestamp=1_700_000_000_123_456 if number % 2 else 0,
    )
    if old is not None:
        message.old.CopyFrom(row(table, *old))
    if new is not None:
        message.new.CopyFrom(row(table, *new))
    if provenance is not None:
        message.provenance.CopyFrom(provenance)
    return message


def batch(*mutations: stream_pb2.Mutation, batch_id: int = 5) -> CommittedBatch:
    return CommittedBatch(
        node=NODE.bytes,
        batch_id=batch_id,
        begin=stream_pb2.Begin(),
        mutations=mutations,
        position=after(3),
    )


def rows_of(*batches: CommittedBatch) -> list[dict[str, str | None]]:
    plan = plan_micro_batch(
        batches, (KEYED, LOOSE), (), can_alter_type=cast_is_exact, key_text=key_text
    )
    return [dict(zip(COLUMNS, values, strict=True)) for values in audit_rows("c", "s", plan)]


def test_a_stamp_holds_what_the_source_knew_and_none_for_the_gaps() -> None:
    assert stamp_of(mutation(KEYED, 1, Op.INSERT, new=(1, "a", None))) is None
    full = stamp_of(mutation(KEYED, 1, Op.INSERT, new=(1, "a", None), provenance=ALICE))
    assert full is not None
    assert full._asdict() == {
        "current_user": "alice",
        "session_user": "app",
        "application_name": "billing",
        "client_addr": "10.1.2.3",
        "query_id": -4242,
        "annotation": "req-7\tx",
    }
    local = stream_pb2.Provenance(current_user="bob", session_user="bob")
    gaps = stamp_of(mutation(KEYED, 1, Op.INSERT, new=(1, "a", None), provenance=local))
    assert gaps is not None and gaps.query_id is None and gaps.client_addr is None
    assert tuple(gaps) == ("bob", "bob", None, None, None, None)
    assert FIELDS == tuple(field.name for field in _parquet_tables.PROVENANCE)


def test_the_change_log_column_is_null_without_provenance_and_a_struct_with_it() -> None:
    stamped = batch(
        mutation(KEYED, 1, Op.INSERT, new=(1, "a", None), provenance=ALICE),
        mutation(KEYED, 2, Op.INSERT, new=(2, "a", None)),
    )
    entries: list[Entry] = [(stamped, m) for m in stamped.mutations]
    column = _parquet_tables.provenance_array(entries)
    assert column.type == _parquet_tables.PROVENANCE
    assert column.to_pylist() == [stamp_of(stamped.mutations[0])._asdict(), None]  # type: ignore[union-attr]
    plain = [(stamped, stamped.mutations[1])] * 3
    nulls = _parquet_tables.provenance_array(plain)
    assert nulls.null_count == 3 and nulls.type == _parquet_tables.PROVENANCE
    schema = _parquet_tables._change_log_schema(KEYED)
    assert schema.field("provenance").type == _parquet_tables.PROVENANCE
    assert pa.types.is_struct(schema.field("provenance").type)


def test_one_audit_row_per_mutation_with_its_key_and_provenance() -> None:
    rows = rows_of(
        batch(
            mutation(KEYED, 1, Op.INSERT, new=(1, "a", "x"), provenance=ALICE),
            mutation(KEYED, 2, Op.UPDATE, old=(1, "a", "x"), new=(1, "a", "y")),
            mutation(KEYED, 3, Op.UPDATE, old=(1, "a", "y"), new=(2, 'ü"', "y")),
            mutation(KEYED, 4, Op.DELETE, old=(2, 'ü"', "y"), provenance=ALICE),
            mutation(KEYED, 5, Op.TRUNCATE),
            mutation(LOOSE, 6, Op.INSERT, new=("n",), provenance=ALICE),
        ),
        batch(mutation(KEYED, 1, Op.INSERT, new=(1, "a", "x")), batch_id=6),
    )
    assert [(r["batch_id"], r["mutation_id"], r["operation"]) for r in rows] == [
        ("5", "1", "INSERT"),
        ("5", "2", "UPDATE"),
        ("5", "3", "UPDATE"),
        ("5", "4", "DELETE"),
        ("5", "5", "TRUNCATE"),
        ("6", "1", "INSERT"),
        ("5", "6", "INSERT"),  # grouped per table, as applied
    ]
    first, kept, moved, deleted, truncated, second, loose = rows
    assert first["node"] == str(NODE) and first["cluster"] == "c" and first["set_name"] == "s"
    assert first["transaction"] == "901" and first["schema_name"] == "public"
    assert first["changed_at"] == "2023-11-14 22:13:20.123456+00"
    assert kept["changed_at"] is None, "no timestamp in the stream: not known"
    assert json.loads(first["key"] or "") == {"id": "1", "sub": "a"}
    assert first["old_key"] is None
    assert kept["old_key"] is None, "an UPDATE that keeps its key"
    assert json.loads(moved["key"] or "") == {"id": "2", "sub": 'ü"'}
    assert json.loads(moved["old_key"] or "") == {"id": "1", "sub": "a"}
    assert json.loads(deleted["key"] or "") == {"id": "2", "sub": 'ü"'}
    assert truncated["key"] is None and truncated["old_key"] is None
    assert loose["key"] is None and loose["table_name"] == "loose", "no key to show"
    provenance = ["current_user_name", "session_user_name", "application_name"]
    provenance += ["client_addr", "query_id", "annotation"]
    assert [first[name] for name in provenance] == [
        "alice",
        "app",
        "billing",
        "10.1.2.3",
        "-4242",
        "req-7\tx",
    ]
    assert [deleted[name] for name in provenance] == [first[name] for name in provenance]
    for unstamped in (kept, moved, truncated, second):
        assert [unstamped[name] for name in provenance] == [None] * 6


def test_a_plan_without_mutations_has_no_audit_rows() -> None:
    assert rows_of(batch()) == []


def test_keys_of_rows_out_of_shape_order_are_read_by_name() -> None:
    delete = mutation(KEYED, 1, Op.DELETE)
    delete.old.columns.add(name="sub").value.string = "b"
    delete.old.columns.add(name="id").value.int64 = 7
    update = mutation(KEYED, 2, Op.UPDATE, old=(7, "b", None), new=(8, "b", None))
    update.new.columns[0].name, update.new.columns[1].name = "sub", "id"
    update.new.columns[0].value.string, update.new.columns[1].value.int64 = "b", 8
    deleted, updated = rows_of(batch(delete, update))
    assert json.loads(deleted["key"] or "") == {"id": "7", "sub": "b"}
    assert json.loads(updated["key"] or "") == {"id": "8", "sub": "b"}
    assert json.loads(updated["old_key"] or "") == {"id": "7", "sub": "b"}
