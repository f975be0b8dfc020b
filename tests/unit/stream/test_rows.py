"""The ROWS encoding: COPY text lines, MutationBatch bytes, typed mutations, partitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import to_text
from pgshovel.stream.rows import (
    RowsBuilder,
    copy_line,
    key_fields,
    mutations_in,
    partition_of,
    row_table,
    split_line,
    to_mutations,
)

texts = st.one_of(st.none(), st.text())


@settings(deadline=None)
@given(st.lists(texts, min_size=1, max_size=8))
def test_a_line_splits_back_into_its_values(values):
    assert split_line(copy_line(values)) == values


def test_postgres_escapes_are_read_as_copy_reads_them():
    assert split_line(b"a\\tb\t\\N\t\\\\N\tx\\101\\x41y") == ["a\tb", None, "\\N", "xAAy"]


def _shape() -> stream_pb2.TableShape:
    return stream_pb2.TableShape(
        schema="public",
        name="orders",
        key=["id"],
        columns=[
            stream_pb2.ColumnShape(name="id", number=1, sql_type="integer", type_name="int4"),
            stream_pb2.ColumnShape(name="note", number=2, sql_type="text", type_name="text"),
            stream_pb2.ColumnShape(
                name="at", number=3, sql_type="timestamptz", type_name="timestamptz"
            ),
        ],
    )


def test_the_builder_writes_what_the_runtime_reads():
    builder = RowsBuilder()
    table = row_table(_shape(), "v1")
    other = row_table(stream_pb2.TableShape(schema="s", name="t"), "v1")
    provenance = stream_pb2.Provenance(session_user="app", annotation="x" * 300)
    encoded = provenance.SerializeToString()
    builder.add(table, 10, stream_pb2.Mutation.INSERT, 77, 1_000, None, b"1\ta\t\\N", encoded)
    builder.add(other, 11, stream_pb2.Mutation.TRUNCATE, 77, 1_001, None, None, None)
    builder.add(
        table, 12, stream_pb2.Mutation.UPDATE, 78, 0, b"1\ta\t\\N", b"2\tb\\tc\t\\N", encoded
    )
    assert builder.count == 3
    payload = builder.take()
    assert payload is not None and builder.take() is None
    batch = stream_pb2.MutationBatch.FromString(payload)
    assert batch.count == 3
    assert [change.id for change in batch.changes] == [10, 11, 12]
    assert [change.table for change in batch.changes] == [0, 1, 0]
    assert len(batch.provenances) == 1  # once per message, whatever its size
    assert [change.provenance for change in batch.changes] == [1, 0, 1]
    expected = stream_pb2.MutationBatch()
    expected.tables.add().CopyFrom(stream_pb2.RowTable.FromString(table))
    expected.tables.add().CopyFrom(stream_pb2.RowTable.FromString(other))
    expected.changes.add().CopyFrom(batch.changes[0])
    expected.changes.add().CopyFrom(batch.changes[1])
    expected.changes.add().CopyFrom(batch.changes[2])
    expected.provenances.add().CopyFrom(provenance)
    expected.count = 3
    assert expected.SerializeToString() == payload


def test_changes_read_back_as_typed_mutations():
    builder = RowsBuilder()
    table = row_table(_shape(), "v1")
    builder.add(
        table, 5, stream_pb2.Mutation.UPDATE, 9, 42, b"1\tx\t\\N", b"1\ty\t2024-01-02 03:04:05+00"
    )
    builder.add(table, 6, stream_pb2.Mutation.DELETE, 9, 43, b"1\ty\t\\N", None)
    payload = builder.take()
    assert payload is not None
    update, delete = to_mutations(stream_pb2.MutationBatch.FromString(payload))
    assert (update.schema, update.table, list(update.key_columns)) == ("public", "orders", ["id"])
    assert update.set_version == "v1" and update.transaction == 9 and update.timestamp == 42
    assert [to_text(column.value) for column in update.new.columns] == [
        "1",
        "y",
        "2024-01-02 03:04:05+00",
    ]
    assert update.old.columns[2].value.WhichOneof("kind") == "null"
    assert delete.operation == stream_pb2.Mutation.DELETE and not delete.HasField("new")

    # A reader of the set topic gets the same mutations from either encoding.
    rows = stream_pb2.Message()
    rows.operation.rows.ParseFromString(payload)
    assert mutations_in(rows) == [update, delete]
    single = stream_pb2.Message()
    single.operation.mutation.CopyFrom(update)
    assert mutations_in(single) == [update]
    begin = stream_pb2.Message()
    begin.operation.begin.SetInParent()
    assert mutations_in(begin) == []


def test_a_line_that_does_not_fit_its_shape_is_an_error():
    builder = RowsBuilder()
    builder.add(row_table(_shape(), ""), 5, stream_pb2.Mutation.INSERT, 9, 42, None, b"1\tx")
    payload = builder.take()
    assert payload is not None
    with pytest.raises(CodecError, match="holds 2 field"):
        list(to_mutations(stream_pb2.MutationBatch.FromString(payload)))


def test_key_fields_are_the_escaped_fields():
    assert key_fields(b"a\\tb\tc\td", (0, 2)) == ("a\\tb", "d")


@settings(deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=3), st.integers(min_value=1, max_value=64))
def test_partitions_are_stable_and_in_range(key, partitions):
    first = partition_of("public", "orders", key, partitions)
    assert first == partition_of("public", "orders", list(key), partitions)
    assert 0 <= first < partitions


def test_keys_spread_over_partitions_and_unkeyed_tables_keep_one():
    counts = [0] * 4
    for number in range(4000):
        counts[partition_of("public", "orders", (str(number),), 4)] += 1
    assert min(counts) > 800
    assert len({partition_of("public", "log", None, 4) for _ in range(10)}) == 1
