"""A micro-batch plan as one net effect per touched table, for the Delta and Iceberg targets.

``EffectBuilder`` folds a plan's steps (and the parts of a batch too large to
hold whole) into, per table: its shape before the micro-batch, its shape
after, the values existing rows got for added columns, whether a TRUNCATE
came, and for each key touched its last row (with the change columns of the
mutation that wrote it) or a deletion — the last change wins, a key change
deletes the old key (``pgshovel.replication.changes.reduce_keyed``). A schema
change in the middle converts the rows gathered so far to the new shape, as
the copy's stored rows are converted (``_parquet_tables.evolve``). A renamed
table's effect moves to its new name (``before`` keeps the stored name), a
dropped table is listed in ``dropped``; unkeyed tables are refused: a net
effect needs a key.

Folding reads only what it needs per mutation: the operation, the shape check of
each row and the key's values; a row holding the table's columns in order is kept
as the stream's row (``_Pending``) and typed only if it survives the micro-batch,
one column at a time (``_arrow.column_values``), so a key changed many times costs
one conversion, not one per change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.changes import Operation, key_of
from pgshovel.replication.mutations import OPERATIONS, in_shape_order, operation_of, row_values
from pgshovel.replication.provenance import stamp_of
from pgshovel.replication.targets import _arrow
from pgshovel.replication.targets._parquet_tables import PROVENANCE, evolve
from pgshovel.source import TableShape
from pgshovel.stream.plan import MicroBatchPlan, SchemaStep, Segment

__all__ = ["RELOAD", "EffectBuilder", "TableEffect", "refuse_unkeyed"]

#: The remedy when a copy cannot follow: load it again (the state lives in these files).
RELOAD = (
    "reload the target from a fresh snapshot: stop the worker, remove the target's "
    "_pgshovel/<cluster>.<set> directory and start the worker again"
)

Identity = tuple[str, str]
#: a stored row: the shape's values, then txid, batch, timestamp (µs) and provenance
Row = tuple[Any, ...]
Key = tuple[Any, ...]


class _Pending:
    """A kept row still in the stream's values: its mutation's new row holds the effect's
    shape's columns in order (checked when it was folded)."""

    __slots__ = ("batch", "mutation")

    def __init__(self, mutation: stream_pb2.Mutation, batch: int) -> None:
        self.mutation = mutation
        self.batch = batch


def _key_reader(
    shape: TableShape, names: list[str], places: Sequence[int]
) -> Callable[[stream_pb2.Row], Key | None]:
    """Reads the key (Arrow values) of a row holding exactly ``names`` in order, its key
    columns at ``places``; None for any other row (read by name then, and checked)."""
    pairs = [
        (place, shape.columns[position])
        for place, position in zip(places, shape.key_positions, strict=True)
    ]
    arrow_value = _arrow.arrow_value

    def read(row: stream_pb2.Row) -> Key | None:
        if not in_shape_order(row, names):
            return None
        cells = row.columns
        return tuple([arrow_value(column, cells[place].value) for place, column in pairs])

    return read


def _stored(values: Sequence[Any], mutation: stream_pb2.Mutation, batch: int) -> Row:
    """A stored row: ``values`` (the shape's, typed) and the change columns of ``mutation``."""
    stamp = stamp_of(mutation)
    return (
        *values,
        mutation.transaction,
        batch,
        mutation.timestamp,
        None if stamp is None else stamp._asdict(),
    )


def _typed(shape: TableShape, pending: Sequence[_Pending]) -> list[Row]:
    """The stored rows of ``pending`` (in that order), typed column by column."""
    cells = [item.mutation.new.columns for item in pending]
    columns = [
        _arrow.column_values(column, [row[index].value for row in cells])
        for index, column in enumerate(shape.columns)
    ]
    return [
        _stored(values, item.mutation, item.batch)
        for values, item in zip(zip(*columns, strict=True), pending, strict=True)
    ]


def refuse_unkeyed(kind: str, shapes: Sequence[TableShape]) -> None:
    unkeyed = [shape.qualified for shape in shapes if not shape.key]
    if unkeyed:
        raise SchemaError(
            f"{kind} target: tables {unkeyed!r} have no key, and a table format copy is merged "
            "by key; declare key_columns for them in the set ('pgshovel-admin set update') or "
            "replicate them to the postgresql target"
        )


@dataclass
class TableEffect:
    """One table's part of a micro-batch (see the module docstring)."""

    #: the table's shape before the micro-batch (None: the micro-batch creates it)
    before: TableShape | None
    shape: TableShape
    defaults: dict[str, stream_pb2.Value] = field(default_factory=dict)
    truncate: bool = False
    truncate_txid: int | None = None
    truncate_time: int | None = None
    #: key -> last row (None: deleted), in the order of the last change
    rows: dict[Key, Row | _Pending | None] = field(default_factory=dict)
    #: deleted key -> the deleting change's (txid, timestamp), which a history closes with
    deleted_by: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)
    batches: set[int] = field(default_factory=set)

    def typed(self) -> dict[Key, Row | None]:
        """The rows with every kept row typed (converts the ``_Pending`` ones in place)."""
        pending = [(key, row) for key, row in self.rows.items() if isinstance(row, _Pending)]
        if pending:
            typed = _typed(self.shape, [row for _, row in pending])
            for (key, _), row in zip(pending, typed, strict=True):
                self.rows[key] = row  # same key: its place in the order stays
        return self.rows  # type: ignore[return-value]  # no _Pending is left

    def table(self) -> pa.Table:
        """The rows as a net effect's Arrow rows (``_effect.effect_schema``)."""
        from pgshovel.replication.tables._effect import effect_schema

        shape = self.shape
        width = len(shape.columns)
        positions = shape.key_positions
        values: list[Row] = []
        deleted: list[bool] = []
        for key, row in self.typed().items():
            if row is None:
                cells: list[Any] = [None] * (width + 4)
                for position, value in zip(positions, key, strict=True):
                    cells[position] = value
                cells[width], cells[width + 2] = self.deleted_by.get(key, (None, None))
                values.append(tuple(cells))
                deleted.append(True)
            else:
                values.append(row)
                deleted.append(False)
        data = _arrow.to_arrow(shape, [row[:width] for row in values])
        change_columns = [
            pa.array([row[width] for row in values], pa.int64()),
            pa.array([row[width + 1] for row in values], pa.int64()),
            pa.array([row[width + 2] for row in values], pa.timestamp("us", tz="UTC")),
            pa.array([row[width + 3] for row in values], PROVENANCE),
        ]
        arrays = [*data.columns, *change_columns, pa.array(deleted, pa.bool_())]
        return pa.Table.from_arrays(arrays, schema=effect_schema(shape))

    def evolve_to(self, after: TableShape, defaults: dict[str, stream_pb2.Value]) -> None:
        """Convert the rows gathered so far to ``after`` (a schema change of the table)."""
        before = self.shape
        width = len(before.columns)
        kept = [(key, row) for key, row in self.typed().items() if row is not None]
        converted = evolve(
            _arrow.to_arrow(before, [row[:width] for _, row in kept]), before, after, defaults
        )
        if converted.num_rows != len(kept):  # a key column lost its values: the table empties
            self.rows.clear()
        else:
            columns = [converted.column(name).to_pylist() for name in after.column_names]
            new_rows = iter(zip(*columns, strict=True)) if columns else iter(())
            updated: dict[Key, Row | _Pending | None] = {}
            for key, row in self.typed().items():
                if row is None:
                    updated[key] = None
                    continue
                values = next(new_rows)
                updated[key_of(values, after.key_positions)] = (*values, *row[width:])
            self.rows = updated
        self.defaults.update(defaults)
        self.shape = after


class EffectBuilder:
    """Folds the steps of a micro-batch (or of its parts) into ``TableEffect``s."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.effects: dict[Identity, TableEffect] = {}
        #: the tables to drop (as they are stored), before the micro-batch's commits
        self.dropped: list[TableShape] = []

    def add(self, plan: MicroBatchPlan) -> None:
        for step in plan.steps:
            if isinstance(step, Segment):
                for run in step.runs:
                    self._run(run.table, run.entries)
            else:
                self._schema(step)

    def _effect(self, shape: TableShape) -> TableEffect:
        effect = self.effects.get(shape.identity)
        if effect is None:
            effect = self.effects[shape.identity] = TableEffect(shape, shape)
        return effect

    def _run(self, shape: TableShape, entries: Sequence[tuple[Any, stream_pb2.Mutation]]) -> None:
        refuse_unkeyed(self.kind, [shape])
        effect = self._effect(shape)
        # Rows are kept untyped only in the shape the effect types them in.
        deferred = effect.shape == shape
        positions = shape.key_positions
        names = list(shape.column_names)
        # What a relay writes: the old row holds the key only, the new row every column.
        old_key_of = _key_reader(shape, list(shape.key), range(len(positions)))
        new_key_of = _key_reader(shape, names, positions)
        rows = effect.rows
        batches = effect.batches
        deleted_by = effect.deleted_by
        for batch, mutation in entries:
            batches.add(batch.batch_id)
            operation = OPERATIONS.get(mutation.operation) or operation_of(mutation, shape)
            if operation is Operation.TRUNCATE:
                effect.truncate = True
                effect.truncate_txid = mutation.transaction
                effect.truncate_time = mutation.timestamp
                rows.clear()
                continue
            if operation is not Operation.INSERT:
                old = mutation.old
                old_key = old_key_of(old) or new_key_of(old)
                if old_key is None:
                    values = row_values(old, shape, shape.key, "old", _arrow.arrow_value)
                    old_key = key_of(values, positions)
                rows.pop(old_key, None)
                rows[old_key] = None
                deleted_by[old_key] = (mutation.transaction, mutation.timestamp)
            if operation is Operation.DELETE:
                continue
            new = mutation.new
            kept: Row | _Pending
            new_key = new_key_of(new) if deferred else None
            if new_key is not None:
                kept = _Pending(mutation, batch.batch_id)
            else:
                values = row_values(new, shape, names, "new", _arrow.arrow_value)
                new_key = key_of(values, positions)
                kept = _stored(values, mutation, batch.batch_id)
            rows.pop(new_key, None)
            rows[new_key] = kept

    def _schema(self, step: SchemaStep) -> None:
        before, after, change = step.before, step.after, step.change
        if after is None:
            if before is not None and change.kind == stream_pb2.SchemaChange.DROP:
                self._drop(before)
            return  # left the set, or its capture broke: keep the copy as it is
        refuse_unkeyed(self.kind, [after])
        if before is None:
            self.effects.setdefault(after.identity, TableEffect(None, after))
            return
        defaults = {column.name: column.value for column in change.added_defaults}
        if before.key != after.key:
            self._rekey(before, after)
        if before.identity == after.identity:
            self._effect(before).evolve_to(after, defaults)
            return
        if after.identity in self.effects:
            raise SchemaError(
                f"table {before.qualified!r} was renamed to {after.qualified!r}, a name another "
                f"table had in the same micro-batch, which the {self.kind} target cannot follow; "
                f"{RELOAD}"
            )
        effect = self.effects.pop(before.identity, None) or TableEffect(before, before)
        effect.evolve_to(after, defaults)
        self.effects[after.identity] = effect

    def _drop(self, shape: TableShape) -> None:
        """The copy of a dropped table goes (what it held under its name before the
        micro-batch: a table renamed in the micro-batch is dropped under its old name)."""
        effect = self.effects.pop(shape.identity, None)
        stored = shape if effect is None else effect.before
        if stored is not None:
            self.dropped.append(stored)

    def _rekey(self, before: TableShape, after: TableShape) -> None:
        """The key changed (``set update``): rows gathered under the old key can be merged by
        the new one only after a TRUNCATE (the table is overwritten then); otherwise the
        copy's stored rows would have to be removed by their old key first."""
        effect = self.effects.get(before.identity)
        if effect is None or not effect.rows:
            return
        if not effect.truncate:
            raise SchemaError(
                f"table {before.qualified!r}: its key changed from {list(before.key)!r} to "
                f"{list(after.key)!r} in a micro-batch that also changed its rows, which the "
                f"{self.kind} target cannot merge yet; {RELOAD}"
            )
        effect.rows = {key: row for key, row in effect.rows.items() if row is not None}
