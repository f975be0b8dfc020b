"""What a consumer stores together with the data it applied, to resume exactly.

``WorkerState`` is written by a target in the same atomic step as the effect of
the batches it applied: the stream position, the shapes of the tables as of
that position (schema changes in the stream move them), and the progress of
every incremental snapshot under way (``SnapshotTask``: which key-range chunks
of which table still have to be copied or compared). ``to_document`` and
``from_document`` give the JSON form both targets store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from pgshovel.source import Column, TableShape
from pgshovel.stream.batches import StreamPosition

Phase = Literal["snapshot", "streaming"]
Purpose = Literal["backfill", "resnapshot", "repair", "verify"]
Bound = tuple[str, ...] | None


@dataclass(frozen=True)
class SnapshotTask:
    """An incremental snapshot of one table (or a filtered part of it), chunk by chunk.

    ``ranges`` are the key ranges planned (``[lower, upper)``, text key values,
    None unbounded); ``done`` the indexes of the ranges already applied (or
    compared, for ``verify``); ``differences`` the ranges a verify found
    different, with the rows counted on each side; ``repair`` a verify that
    copies the ranges it found different again (``set verify --repair``; the
    verify after that repair only reports).
    """

    id: str
    schema: str
    table: str
    purpose: Purpose
    where: str = ""
    ranges: tuple[tuple[Bound, Bound], ...] = ()
    done: tuple[int, ...] = ()
    #: the request (a ZooKeeper node name) this task serves; "" for the worker's own
    origin: str = ""
    #: verify: (range index, source rows, target rows, differing buckets)
    differences: tuple[tuple[int, int, int, int], ...] = ()
    #: rows copied (or compared) so far and the planner's estimate of the total
    rows: int = 0
    estimate: int = 0
    repair: bool = False

    @property
    def identity(self) -> tuple[str, str]:
        return (self.schema, self.table)

    @property
    def planned(self) -> bool:
        return bool(self.ranges)

    @property
    def finished(self) -> bool:
        return self.planned and len(self.done) == len(self.ranges)

    def pending(self) -> list[int]:
        """The ranges still to do, in order."""
        done = set(self.done)
        return [index for index in range(len(self.ranges)) if index not in done]

    def plan(self, ranges: tuple[tuple[Bound, Bound], ...], estimate: int) -> SnapshotTask:
        """The task with its ranges planned (nothing done yet)."""
        return dataclasses.replace(
            self, ranges=ranges, estimate=estimate, done=(), rows=0, differences=()
        )

    def record(
        self, index: int, rows: int, differences: tuple[tuple[int, int, int, int], ...] = ()
    ) -> SnapshotTask:
        """The task with range ``index`` done."""
        return dataclasses.replace(
            self,
            done=tuple(sorted({*self.done, index})),
            rows=self.rows + rows,
            differences=(*self.differences, *differences),
        )

    def restarted(self) -> SnapshotTask:
        """The task from the start (its table changed shape): planned again, nothing done."""
        return dataclasses.replace(self, ranges=(), done=(), rows=0, differences=(), estimate=0)


@dataclass(frozen=True)
class WorkerState:
    """What a worker stores with the applied data to resume exactly.

    ``snapshot`` is the loader's ``txid_current_snapshot()`` text, ``start_offset``
    the topic offset noted before it was exported, ``position`` the last applied
    batch (None until the first one), ``tables`` the shapes of the set's tables as
    of ``position`` (empty in a state written before pgshovel 0.2: then the source
    catalog tells), ``broken`` the tables whose capture stopped following the set
    (their mutations are skipped until a remedy copies them again), ``tasks`` the
    incremental snapshots under way, ``horizon`` the txid snapshot of the last
    applied batch's end tick (text; empty before the first batch).
    """

    phase: Phase
    snapshot: str
    start_offset: int
    position: StreamPosition | None = None
    tables: tuple[TableShape, ...] = ()
    broken: tuple[tuple[str, str], ...] = ()
    tasks: tuple[SnapshotTask, ...] = ()
    horizon: str = ""

    @property
    def next_offset(self) -> int:
        return self.start_offset if self.position is None else self.position.offset + 1

    @property
    def applied_horizon(self) -> str:
        """A txid snapshot whose visible transactions are all in the copy: the last applied
        batch's end tick, or before any batch the snapshot the copy was loaded from."""
        return self.horizon or self.snapshot

    def table(self, schema: str, name: str) -> TableShape | None:
        for table in self.tables:
            if table.identity == (schema, name):
                return table
        return None

    def replace(self, **changes: Any) -> WorkerState:
        return dataclasses.replace(self, **changes)


# -- JSON ---------------------------------------------------------------------


def _bound(value: Any) -> Bound:
    return None if value is None else tuple(str(item) for item in value)


def shape_to_document(shape: TableShape) -> dict[str, Any]:
    return {
        "schema": shape.schema,
        "name": shape.name,
        "key": list(shape.key),
        "relation": shape.relation,
        "columns": [
            [column.name, column.sql_type, column.type_name, column.not_null, column.number]
            for column in shape.columns
        ],
    }


def shape_from_document(document: dict[str, Any]) -> TableShape:
    return TableShape(
        schema=str(document["schema"]),
        name=str(document["name"]),
        key=tuple(document["key"]),
        relation=int(document.get("relation") or 0),
        columns=tuple(
            Column(str(name), str(sql_type), str(type_name), bool(not_null), int(number))
            for name, sql_type, type_name, not_null, number in document["columns"]
        ),
    )


def task_to_document(task: SnapshotTask) -> dict[str, Any]:
    document = dataclasses.asdict(task)
    document["ranges"] = [[lower, upper] for lower, upper in task.ranges]
    return document


def task_from_document(document: dict[str, Any]) -> SnapshotTask:
    return SnapshotTask(
        id=str(document["id"]),
        schema=str(document["schema"]),
        table=str(document["table"]),
        purpose=document["purpose"],
        where=str(document.get("where") or ""),
        ranges=tuple((_bound(lower), _bound(upper)) for lower, upper in document["ranges"]),
        done=tuple(int(index) for index in document["done"]),
        origin=str(document.get("origin") or ""),
        differences=tuple(
            (int(a), int(b), int(c), int(d)) for a, b, c, d in document.get("differences") or ()
        ),
        rows=int(document.get("rows") or 0),
        estimate=int(document.get("estimate") or 0),
        repair=bool(document.get("repair")),
    )


def position_to_document(position: StreamPosition | None) -> dict[str, Any] | None:
    if position is None:
        return None
    return {
        "offset": position.offset,
        "publisher": position.publisher.hex(),
        "sequence": position.sequence,
        "epoch": position.epoch,
        "committed": [[node.hex(), batch] for node, batch in position.committed],
    }


def position_from_document(document: dict[str, Any] | None) -> StreamPosition | None:
    if document is None:
        return None
    return StreamPosition(
        offset=int(document["offset"]),
        publisher=bytes.fromhex(document["publisher"]),
        sequence=int(document["sequence"]),
        epoch=int(document["epoch"]),
        committed=tuple((bytes.fromhex(node), int(batch)) for node, batch in document["committed"]),
    )


def to_document(state: WorkerState) -> dict[str, Any]:
    """The JSON form of a state."""
    return {
        "phase": state.phase,
        "snapshot": state.snapshot,
        "start_offset": state.start_offset,
        "position": position_to_document(state.position),
        "tables": [shape_to_document(table) for table in state.tables],
        "broken": [list(name) for name in state.broken],
        "tasks": [task_to_document(task) for task in state.tasks],
        "horizon": state.horizon,
    }


def from_document(document: dict[str, Any]) -> WorkerState:
    """The state a JSON form describes (documents from before 0.2 have no tables or tasks)."""
    return WorkerState(
        phase=document["phase"],
        snapshot=str(document["snapshot"]),
        start_offset=int(document["start_offset"]),
        position=position_from_document(document.get("position")),
        tables=tuple(shape_from_document(item) for item in document.get("tables") or ()),
        broken=tuple((str(schema), str(name)) for schema, name in document.get("broken") or ()),
        tasks=tuple(task_from_document(item) for item in document.get("tasks") or ()),
        horizon=str(document.get("horizon") or ""),
    )
