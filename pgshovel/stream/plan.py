"""A micro-batch as the steps a target applies, in stream order: pure, no I/O.

Mutations are grouped per table into segments; a schema change of a table ends
the segment, so the mutations before it are applied with the old shape, then
the change, then the mutations after it with the new shape, all in the one
target transaction that also stores the position. The planner also keeps the
set's table shapes (what the next micro-batch is planned against), the tables
whose capture broke (their mutations are skipped until a remedy), the tables
the copy must read again (new in the set, rows rewritten by DDL, capture
repaired) and, for incremental snapshots, where each watermark stands and
which keys of which table every batch changed (read from the rows only when
asked: planning itself reads no values).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.source import Column, TableShape
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.shapes import shape_from_proto

SchemaChange = stream_pb2.SchemaChange
Entry = tuple[CommittedBatch, stream_pb2.Mutation]


@dataclass(frozen=True)
class TableRun:
    """One table's mutations within a segment, in stream order, all of ``table``'s shape."""

    table: TableShape
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Segment:
    """Mutations between two schema changes (or the micro-batch's ends), per table."""

    runs: tuple[TableRun, ...]


@dataclass(frozen=True)
class SchemaStep:
    """A schema change a target applies: ``before`` becomes ``after``.

    ``before`` None: a table new to the copy (create it). ``after`` None: the
    table was dropped (``change.kind == DROP``: drop it), left the set
    (``REMOVE``: keep it, stop applying) or cannot be captured any more
    (``change.problem``: keep it, skip its mutations).
    """

    change: stream_pb2.SchemaChange
    before: TableShape | None
    after: TableShape | None


Step = Segment | SchemaStep


#: A row's key values as text (None when the row is empty or the table unkeyed).
KeyText = Callable[[stream_pb2.Row, TableShape], tuple[str | None, ...] | None]


Keys = dict[tuple[str, str], set[tuple[str | None, ...]]]
Unkeyed = dict[tuple[str, str], tuple[stream_pb2.Mutation, ...]]


@dataclass(frozen=True)
class BatchChanges:
    """For incremental snapshots: which tables a batch touched, how, and its watermarks.

    A keyed table's changes are the keys of the rows they touched, read from the
    rows when first asked for (only a running incremental snapshot asks), not
    while planning. A table without a key has no key to name a row by: its
    changes are its mutations themselves (``unkeyed_of``).
    """

    batch: CommittedBatch
    #: tables a TRUNCATE or a schema change touched (every row may have changed)
    whole: set[tuple[str, str]]
    watermarks: tuple[stream_pb2.Watermark, ...]
    #: the batch's row mutations with their table's shape at that point, in order
    touched: tuple[tuple[TableShape, stream_pb2.Mutation], ...] = ()
    key_text: KeyText | None = None
    #: the keys, read already (a part of a batch kept after its mutations were let go)
    known_keys: Keys | None = None
    #: the unkeyed tables' mutations, kept with ``known_keys``
    known_unkeyed: Unkeyed | None = None

    @cached_property
    def keys(self) -> Keys:
        """keyed table -> key values (text) of every row a mutation of the batch touched."""
        if self.known_keys is not None:
            return self.known_keys
        return self._read_keys(None)

    def keys_of(self, tables: Collection[tuple[str, str]]) -> Keys:
        """``keys`` of ``tables`` only (the rows of other tables are not read)."""
        if self.known_keys is not None or "keys" in self.__dict__:
            return {name: touched for name, touched in self.keys.items() if name in tables}
        return self._read_keys(tables)

    def _read_keys(self, tables: Collection[tuple[str, str]] | None) -> Keys:
        keys: Keys = {}
        key_text = self.key_text
        for table, mutation in self.touched:
            if not table.key or (tables is not None and table.identity not in tables):
                continue
            touched = keys.setdefault(table.identity, set())
            if key_text is None:
                continue
            for row in (mutation.old, mutation.new):
                key = key_text(row, table)
                if key is not None:
                    touched.add(key)
        return keys

    def unkeyed_of(self, tables: Collection[tuple[str, str]]) -> Unkeyed:
        """The row mutations of the unkeyed tables among ``tables``, in stream order."""
        if self.known_unkeyed is not None:
            return {name: found for name, found in self.known_unkeyed.items() if name in tables}
        found: dict[tuple[str, str], list[stream_pb2.Mutation]] = {}
        for table, mutation in self.touched:
            if not table.key and table.identity in tables:
                found.setdefault(table.identity, []).append(mutation)
        return {name: tuple(mutations) for name, mutations in found.items()}

    def settled(self, tables: Collection[tuple[str, str]]) -> BatchChanges:
        """These changes without the mutations (a part of a batch, applied but kept until
        the batch commits): the changes of ``tables`` are read now, the others dropped."""
        return BatchChanges(
            dataclasses.replace(self.batch, mutations=(), markers=()),
            self.whole,
            self.watermarks,
            known_keys=self.keys_of(tables),
            known_unkeyed=self.unkeyed_of(tables),
        )


def join_parts(parts: Sequence[BatchChanges], tables: Collection[tuple[str, str]]) -> BatchChanges:
    """The changes of one batch applied in parts, as if it had come whole (an incremental
    snapshot counts a batch's changes whole: see ``pgshovel.replication.incremental``),
    with the changes of ``tables``."""
    keys: Keys = {}
    unkeyed: dict[tuple[str, str], list[stream_pb2.Mutation]] = {}
    whole: set[tuple[str, str]] = set()
    for part in parts:
        whole |= part.whole
        for name, touched in part.keys_of(tables).items():
            keys.setdefault(name, set()).update(touched)
        for name, mutations in part.unkeyed_of(tables).items():
            unkeyed.setdefault(name, []).extend(mutations)
    return BatchChanges(
        parts[-1].batch,
        whole,
        tuple(mark for part in parts for mark in part.watermarks),
        known_keys=keys,
        known_unkeyed={name: tuple(mutations) for name, mutations in unkeyed.items()},
    )


@dataclass(frozen=True)
class MicroBatchPlan:
    """What a micro-batch does to the copy."""

    steps: tuple[Step, ...]
    tables: tuple[TableShape, ...]
    broken: tuple[tuple[str, str], ...]
    #: tables to read again from the source, with the reason
    recopy: tuple[tuple[TableShape, str], ...]
    #: mutations skipped because their table's capture is broken
    skipped: int
    batches: tuple[BatchChanges, ...] = field(default=())


@dataclass
class _Planner:
    tables: dict[tuple[str, str], TableShape]
    broken: set[tuple[str, str]]
    can_alter_type: Callable[[Column, Column], bool]
    steps: list[Step] = field(default_factory=list)
    runs: dict[tuple[str, str], list[Entry]] = field(default_factory=dict)
    shapes: dict[tuple[str, str], TableShape] = field(default_factory=dict)
    recopy: dict[tuple[str, str], tuple[TableShape, str]] = field(default_factory=dict)
    skipped: int = 0

    def flush(self) -> None:
        if self.runs:
            runs = tuple(
                TableRun(self.shapes[name], tuple(entries)) for name, entries in self.runs.items()
            )
            self.steps.append(Segment(runs))
            self.runs = {}
            self.shapes = {}

    def mutation(
        self,
        batch: CommittedBatch,
        mutation: stream_pb2.Mutation,
        whole: set[tuple[str, str]],
        touched: list[tuple[TableShape, stream_pb2.Mutation]],
    ) -> None:
        name = (mutation.schema, mutation.table)
        if name in self.broken:
            self.skipped += 1
            return
        table = self.tables.get(name)
        if table is None:
            raise SchemaError(
                f"batch {batch.batch_id!r} holds a mutation on {mutation.schema!r}."
                f"{mutation.table!r}, which is not a table of the set as the stream announced "
                "it; the worker's state does not match its stream: reload the target"
            )
        self.runs.setdefault(name, []).append((batch, mutation))
        self.shapes[name] = table
        if mutation.operation == stream_pb2.Mutation.TRUNCATE:
            whole.add(name)
            return
        touched.append((table, mutation))

    def schema_change(self, change: stream_pb2.SchemaChange, whole: set[tuple[str, str]]) -> None:
        self.flush()
        name = (change.schema, change.table)
        before = self._before(change)
        after = shape_from_proto(change.shape) if change.HasField("shape") else None
        if before is not None:
            self.tables.pop(before.identity, None)
            whole.add(before.identity)
        whole.add(name)
        if change.problem:
            self.broken.add(name)
            self.steps.append(SchemaStep(change, before, None))
            return
        if after is None:  # dropped or removed from the set
            self.broken.discard(name)
            self.recopy.pop(name, None)
            self.steps.append(SchemaStep(change, before, None))
            return
        reason = self._recopy_reason(change, before, after, name)
        self.broken.discard(name)
        self.tables[name] = after
        if before is not None and before == after and not reason:
            return  # announced again, unchanged
        self.steps.append(SchemaStep(change, before, after))
        if reason:
            self.recopy[name] = (after, reason)
        elif before is not None and before.identity in self.recopy:
            self.recopy[name] = (after, self.recopy.pop(before.identity)[1])

    def _before(self, change: stream_pb2.SchemaChange) -> TableShape | None:
        if change.relation:
            for table in self.tables.values():
                if table.relation == change.relation:
                    return table
        return self.tables.get((change.schema, change.table))

    def _recopy_reason(
        self,
        change: stream_pb2.SchemaChange,
        before: TableShape | None,
        after: TableShape,
        name: tuple[str, str],
    ) -> str:
        if name in self.broken:
            return "capture was repaired"
        if before is None:
            return "added to the set"
        if change.rewrites_rows:
            return f"{change.command or 'a change'} rewrote existing rows"
        old = {column.number: column for column in before.columns}
        for column in after.columns:
            previous = old.get(column.number)
            if (
                previous is not None
                and previous.sql_type != column.sql_type
                and not self.can_alter_type(previous, column)
            ):
                return f"column {column.name!r} changed type and the target cannot convert it"
        return ""


def _items(
    batch: CommittedBatch,
) -> Iterator[stream_pb2.Mutation | stream_pb2.SchemaChange | stream_pb2.Watermark]:
    """The batch's mutations and markers in stream order."""
    markers = iter(batch.markers)
    upcoming = next(markers, None)
    for position, mutation in enumerate(batch.mutations):
        while upcoming is not None and upcoming[0] <= position:
            yield upcoming[1]
            upcoming = next(markers, None)
        yield mutation
    while upcoming is not None:
        yield upcoming[1]
        upcoming = next(markers, None)


def plan_micro_batch(
    batches: Iterable[CommittedBatch],
    tables: Sequence[TableShape],
    broken: Iterable[tuple[str, str]],
    *,
    can_alter_type: Callable[[Column, Column], bool],
    key_text: KeyText,
) -> MicroBatchPlan:
    """The steps of a micro-batch and the set's tables after it.

    ``can_alter_type(old, new)`` says whether the target converts a column's
    values to a new type itself (else the table is read again); ``key_text``
    gives a row's key values as text (None when the row is empty).
    """
    planner = _Planner({table.identity: table for table in tables}, set(broken), can_alter_type)
    per_batch: list[BatchChanges] = []
    for batch in batches:
        whole: set[tuple[str, str]] = set()
        touched: list[tuple[TableShape, stream_pb2.Mutation]] = []
        watermarks: list[stream_pb2.Watermark] = []
        for item in _items(batch):
            if isinstance(item, stream_pb2.Mutation):
                planner.mutation(batch, item, whole, touched)
            elif isinstance(item, stream_pb2.SchemaChange):
                planner.schema_change(item, whole)
            else:
                watermarks.append(item)
        per_batch.append(BatchChanges(batch, whole, tuple(watermarks), tuple(touched), key_text))
    planner.flush()
    return MicroBatchPlan(
        steps=tuple(planner.steps),
        tables=tuple(planner.tables.values()),
        broken=tuple(sorted(planner.broken)),
        recopy=tuple(planner.recopy.values()),
        skipped=planner.skipped,
        batches=tuple(per_batch),
    )
