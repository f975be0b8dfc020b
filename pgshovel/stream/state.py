"""What a consumer stores together with the data it applied, to resume exactly.

``WorkerState`` is written by a target in the same atomic step as the effect of
the batches it applied: the stream position, the shapes of the tables as of
that position (schema changes in the stream move them), and the progress of
every incremental snapshot under way (``SnapshotTask``: which key-range chunks
of which table still have to be copied or compared). ``to_document`` gives the
one JSON document every target stores; ``from_document`` reads it back (and the
documents of earlier releases), and a document that does not have the expected
shape fails with a ``StateError`` naming the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from pgshovel.errors import StateError, StreamError
from pgshovel.source import Column, TableShape
from pgshovel.stream import _fields
from pgshovel.stream.handoff import parse_txid_snapshot
from pgshovel.stream.position import StreamPosition

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

    ``snapshot`` is the loader's ``txid_current_snapshot()`` text, ``position``
    where the stream resumes: after the last applied batch, or before the first
    one the position the loader noted before it exported its snapshot.
    ``tables`` are the shapes of the set's tables as of ``position`` (empty in a
    state written before pgshovel 0.2: then the source catalog tells),
    ``broken`` the tables whose capture stopped following the set (their
    mutations are skipped until a remedy copies them again), ``tasks`` the
    incremental snapshots under way, ``horizon`` the txid snapshot of the last
    applied batch's end tick (text; empty before the first batch).
    """

    phase: Phase
    snapshot: str
    position: StreamPosition
    tables: tuple[TableShape, ...] = ()
    broken: tuple[tuple[str, str], ...] = ()
    tasks: tuple[SnapshotTask, ...] = ()
    horizon: str = ""

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

#: The version of the document ``to_document`` writes (1: pgshovel 0.2 and earlier, with
#: ``start_offset`` and the last consumed message's ``offset``).
STATE_VERSION = 2

_PHASES = ("snapshot", "streaming")
_PURPOSES = ("backfill", "resnapshot", "repair", "verify")


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


def _column(value: Any, path: str) -> Column:
    name, sql_type, type_name, not_null, number = _fields.fixed(value, path, 5)
    return Column(
        _fields.text(name, f"{path}[0]"),
        _fields.text(sql_type, f"{path}[1]"),
        _fields.text(type_name, f"{path}[2]"),
        _fields.boolean(not_null, f"{path}[3]"),
        _fields.integer(number, f"{path}[4]"),
    )


def shape_from_document(value: Any, path: str = "table") -> TableShape:
    """The table shape ``value`` describes (``path`` names it in errors)."""
    document = _fields.obj(value, path)
    shape = TableShape(
        schema=_fields.text(_fields.field(document, "schema", path), f"{path}.schema"),
        name=_fields.text(_fields.field(document, "name", path), f"{path}.name"),
        key=_fields.items(_fields.field(document, "key", path), f"{path}.key", _fields.text),
        relation=_fields.integer(
            _fields.field(document, "relation", path, default=0), f"{path}.relation"
        ),
        columns=_fields.items(_fields.field(document, "columns", path), f"{path}.columns", _column),
    )
    names = {column.name for column in shape.columns}
    missing = [name for name in shape.key if name not in names]
    if missing:
        raise StateError(
            f"field {path + '.key'!r}: key column(s) {missing!r} are not columns of the table"
        )
    return shape


def task_to_document(task: SnapshotTask) -> dict[str, Any]:
    document = dataclasses.asdict(task)
    document["ranges"] = [
        [None if bound is None else list(bound) for bound in pair] for pair in task.ranges
    ]
    document["done"] = list(task.done)
    document["differences"] = [list(difference) for difference in task.differences]
    return document


def _bound(value: Any, path: str) -> Bound:
    return None if value is None else _fields.items(value, path, _fields.text)


def _range(value: Any, path: str) -> tuple[Bound, Bound]:
    lower, upper = _fields.fixed(value, path, 2)
    return _bound(lower, f"{path}[0]"), _bound(upper, f"{path}[1]")


def _difference(value: Any, path: str) -> tuple[int, int, int, int]:
    index, source, copy, buckets = _fields.fixed(value, path, 4)
    return (
        _fields.integer(index, f"{path}[0]", minimum=0),
        _fields.integer(source, f"{path}[1]", minimum=0),
        _fields.integer(copy, f"{path}[2]", minimum=0),
        _fields.integer(buckets, f"{path}[3]", minimum=0),
    )


def task_from_document(value: Any, path: str = "task") -> SnapshotTask:
    """The snapshot task ``value`` describes (``path`` names it in errors)."""
    document = _fields.obj(value, path)

    def get(key: str, default: Any = _fields.MISSING) -> Any:
        return _fields.field(document, key, path, default)

    def where(key: str) -> str:
        return f"{path}.{key}"

    purpose = _fields.text(get("purpose"), where("purpose"))
    if purpose not in _PURPOSES:
        raise _fields.wrong(where("purpose"), f"one of {list(_PURPOSES)!r}", purpose)
    task = SnapshotTask(
        id=_fields.text(get("id"), where("id")),
        schema=_fields.text(get("schema"), where("schema")),
        table=_fields.text(get("table"), where("table")),
        purpose=purpose,  # type: ignore[arg-type]  # checked against _PURPOSES above
        where=_fields.text(get("where", ""), where("where")),
        ranges=_fields.items(get("ranges"), where("ranges"), _range),
        done=_fields.items(
            get("done"), where("done"), lambda v, p: _fields.integer(v, p, minimum=0)
        ),
        origin=_fields.text(get("origin", ""), where("origin")),
        differences=_fields.items(get("differences", []), where("differences"), _difference),
        rows=_fields.integer(get("rows", 0), where("rows"), minimum=0),
        estimate=_fields.integer(get("estimate", 0), where("estimate"), minimum=0),
        repair=_fields.boolean(get("repair", False), where("repair")),
    )
    out_of_range = [index for index in task.done if index >= len(task.ranges)]
    out_of_range += [index for index, *_ in task.differences if index >= len(task.ranges)]
    if out_of_range:
        raise StateError(
            f"field {path!r}: range(s) {sorted(set(out_of_range))!r} are done or differ but "
            f"the task has {len(task.ranges)!r} range(s)"
        )
    return task


def _name(value: Any, path: str) -> tuple[str, str]:
    schema, table = _fields.fixed(value, path, 2)
    return _fields.text(schema, f"{path}[0]"), _fields.text(table, f"{path}[1]")


def _txid_snapshot(value: Any, path: str, empty: bool = False) -> str:
    snapshot = _fields.text(value, path)
    if empty and not snapshot:
        return snapshot
    try:
        parse_txid_snapshot(snapshot)
    except StreamError:
        raise _fields.wrong(path, "a transaction snapshot 'xmin:xmax:xip,...'", snapshot) from None
    return snapshot


def to_document(state: WorkerState) -> dict[str, Any]:
    """The JSON form of a state: the one document every target stores."""
    return {
        "version": STATE_VERSION,
        "phase": state.phase,
        "snapshot": state.snapshot,
        "position": state.position.to_document(),
        "tables": [shape_to_document(table) for table in state.tables],
        "broken": [list(name) for name in state.broken],
        "tasks": [task_to_document(task) for task in state.tasks],
        "horizon": state.horizon,
    }


def from_document(value: Any) -> WorkerState:
    """The state a JSON form describes; a ``StateError`` names the field that does not read.

    Reads the documents of earlier releases too: version 1 (no ``version`` field) has a
    ``start_offset`` and a ``position`` that is null before the first batch or names the
    last message consumed; documents from before 0.2 have no tables, tasks or horizon.
    """
    document = _fields.obj(value, "state")
    version = _fields.integer(_fields.field(document, "version", "", default=1), "version")
    if version > STATE_VERSION:
        raise StateError(
            f"field 'version': version {version!r} is newer than this release reads "
            f"({STATE_VERSION!r}); run the release that wrote it"
        )
    phase = _fields.text(_fields.field(document, "phase", ""), "phase")
    if phase not in _PHASES:
        raise _fields.wrong("phase", f"one of {list(_PHASES)!r}", phase)
    start_offset = None
    if version < 2:
        start_offset = _fields.integer(
            _fields.field(document, "start_offset", ""), "start_offset", minimum=0
        )
        position = StreamPosition.from_document(
            document.get("position"), "position", start_offset=start_offset
        )
    else:
        position = StreamPosition.from_document(_fields.field(document, "position", ""))
    return WorkerState(
        phase=phase,  # type: ignore[arg-type]  # checked against _PHASES above
        snapshot=_txid_snapshot(_fields.field(document, "snapshot", ""), "snapshot"),
        position=position,
        tables=_fields.items(
            _fields.field(document, "tables", "", default=[]), "tables", shape_from_document
        ),
        broken=_fields.items(_fields.field(document, "broken", "", default=[]), "broken", _name),
        tasks=_fields.items(
            _fields.field(document, "tasks", "", default=[]), "tasks", task_from_document
        ),
        horizon=_txid_snapshot(
            _fields.field(document, "horizon", "", default=""), "horizon", empty=True
        ),
    )
