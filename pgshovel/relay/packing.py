"""Packed queue rows (``ext/packing.c``) expanded into the events they hold, in event id order.

With packing on, the capture trigger writes a transaction's changes as few queue rows
of type ``P``. Each change keeps the event id it took from the queue's sequence when
it was captured (where an unpacked event would have taken it), and the row's ``ev_id``
is its first change's. ``unpacked`` turns a batch's rows, read in ``ev_id`` order, into
exactly the events an unpacked queue would hold, in event id order: each packed row
becomes its changes' ``EventRow`` tuples (``ev_extra1..4`` from the row's table list,
``ev_time`` and ``ev_txid`` the row's), merged with the other rows as the batch
streams. A change is passed on once no row still to come can hold a smaller id (every
row's ids are at least its ``ev_id``), so memory holds only the packed rows whose id
ranges overlap the position read: about one per transaction writing concurrently.

The row's data (see ``ext/packing.c``): a header line ``[tables, runs]``, ``tables``
a list of ``[schema, table, set version, key columns]``, ``runs`` a list of ``[first
id, count, event type, table index]``, then one line per change, each exactly the
``ev_data`` of the change's unpacked event. A table with a fifth element, its
captured columns (a JSON array text), has its changes as COPY lines instead (an
UPDATE two: old, new), which become ``PackedRun``s (``pgshovel.relay.packed_run``):
passed on as they are to a reader that asks for runs (``unpacked(..., runs=True)``:
the relay's framer forwards their lines), else as their events with ``ev_data``
parsed. A row that is not that shape is a ``CodecError`` naming it, never a guess.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any

import orjson

from pgshovel.abc import EventRow
from pgshovel.errors import CodecError
from pgshovel.relay.packed_run import PackedRun, lines_per_change

#: ``ev_type`` of a packed row.
PACKED_EVENT = "P"
#: the event types a run of COPY lines may have
_COPY_TYPES = frozenset("IUD")

_NO_LIMIT = float("inf")


def _event_id(event: EventRow) -> int:
    return int(event[0])


def _malformed(row: EventRow, why: str) -> CodecError:
    return CodecError(f"packed event {row[0]} {why}; was it written by a pgshovel capture trigger?")


#: column lists seen in packed rows' headers, by their JSON text
_COLUMNS: dict[str, tuple[str, ...]] = {}


def _columns(row: EventRow, text: str) -> tuple[str, ...]:
    columns = _COLUMNS.get(text)
    if columns is None:
        try:
            parsed = orjson.loads(text)
        except ValueError:
            parsed = None
        if type(parsed) is not list or any(type(name) is not str for name in parsed):
            raise _malformed(row, f"has columns {text[:200]!r}, expected a JSON array of names")
        if len(_COLUMNS) >= 4096:
            _COLUMNS.clear()
        columns = _COLUMNS[text] = tuple(parsed)
    return columns


def _tables(row: EventRow, tables: Any) -> list[tuple[str, str, str, str, tuple[str, ...] | None]]:
    if type(tables) is not list:
        raise _malformed(row, f"has tables {tables!r}, expected a list")
    checked = []
    for table in tables:
        if (
            type(table) is not list
            or not 4 <= len(table) <= 5
            or any(type(v) is not str for v in table)
        ):
            raise _malformed(
                row, f"has table {table!r}, expected [schema, table, version, keys(, columns)]"
            )
        columns = _columns(row, table[4]) if len(table) == 5 else None
        checked.append((table[0], table[1], table[2], table[3], columns))
    return checked


def expand(row: EventRow, runs: bool = False) -> list[Any]:
    """The events packed row ``row`` holds, in event id order; the changes written as COPY
    lines as ``PackedRun``s with ``runs``, else as their events (``ev_data`` parsed)."""
    event_id, time, txid, _, data = row[:5]
    if not isinstance(data, str):
        raise _malformed(row, "has no data")
    header, _, body = data.partition("\n")
    try:
        parsed = orjson.loads(header)
    except ValueError as error:
        raise _malformed(row, f"has a header that is not JSON ({error})") from error
    if type(parsed) is not list or len(parsed) != 2 or type(parsed[1]) is not list:
        raise _malformed(row, f"has header {header[:200]!r}, expected [tables, runs]")
    tables = _tables(row, parsed[0])
    copied = any(table[4] is not None for table in tables)
    # COPY lines stay bytes (what the set topic carries); JSON lines are text, as before
    lines: list[Any] = body.encode().split(b"\n") if copied else body.split("\n")
    if not body and "\n" not in data:
        lines = []
    events: list[Any] = []
    position = 0
    after = event_id - 1
    for run in parsed[1]:
        if (
            type(run) is not list
            or len(run) != 4
            or type(run[0]) is not int
            or type(run[1]) is not int
            or type(run[2]) is not str
            or type(run[3]) is not int
            or run[1] < 1
            or run[0] <= after
            or not 0 <= run[3] < len(tables)
        ):
            raise _malformed(
                row, f"has run {run!r} after id {after}, expected [first id, count, type, table]"
            )
        first, count, kind, index = run
        schema, name, version, keys, columns = tables[index]
        if columns is not None and kind not in _COPY_TYPES:
            raise _malformed(row, f"has run {run!r} of COPY lines, expected an I, U or D run")
        end = position + (count if columns is None else count * lines_per_change(kind))
        if end > len(lines):
            raise _malformed(row, f"has {len(lines)} lines, fewer than its runs take")
        if columns is not None:
            packed = PackedRun(
                first,
                time,
                txid,
                kind,
                lines[position:end],
                schema,
                name,
                version,
                keys,
                columns,
                count,
                event_id,
            )
            if runs:
                events.append(packed)
            else:
                events.extend(packed.events())
        else:
            texts = lines[position:end]
            events.extend(
                zip(
                    range(first, first + count),
                    repeat(time),
                    repeat(txid),
                    repeat(kind),
                    [line.decode() for line in texts] if copied else texts,
                    repeat(schema),
                    repeat(name),
                    repeat(version),
                    repeat(keys),
                )
            )
        position = end
        after = first + count - 1
    if position != len(lines) or not events or events[0][0] != event_id:
        raise _malformed(
            row,
            f"has {len(lines)} lines and runs for {position}, starting at id "
            f"{events[0][0] if events else None}",
        )
    return events


class _Merge:
    """Packed rows' events not passed on yet: a heap of (next id, serial, events, position).

    An item is an event or a ``PackedRun``, whose ids are consecutive (a run of the row's
    header): no other event's id falls between them, so a run moves whole."""

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, list[Any], int]] = []
        self._serial = 0

    def add(self, events: list[Any]) -> None:
        heapq.heappush(self.heap, (events[0][0], self._serial, events, 0))
        self._serial += 1

    def release(self, limit: float, out: list[Any]) -> None:
        """Move every pending event with an id below ``limit`` into ``out``, in id order."""
        heap = self.heap
        while heap and heap[0][0] < limit:
            _, serial, events, position = heapq.heappop(heap)
            bound = min(limit, heap[0][0]) if heap else limit
            end = bisect_left(events, bound, lo=position + 1, key=_event_id)
            out.extend(events[position:end])
            if end < len(events):
                heapq.heappush(heap, (events[end][0], serial, events, end))


def unpacked(chunks: Iterable[Sequence[EventRow]], runs: bool = False) -> Iterator[list[Any]]:
    """``chunks`` of a batch's rows in ``ev_id`` order as chunks of events in event id order,
    every packed row expanded (see the module's docstring); with ``runs``, a chunk also
    holds ``PackedRun``s (each in the place of its changes)."""
    merge = _Merge()
    for chunk in chunks:
        out: list[Any] = []
        for row in chunk:
            if merge.heap and merge.heap[0][0] < row[0]:
                merge.release(row[0], out)
            if row[3] == PACKED_EVENT:
                merge.add(expand(row, runs))
            else:
                out.append(row)
        if out:
            yield out
    rest: list[Any] = []
    merge.release(_NO_LIMIT, rest)
    if rest:
        yield rest


def events_in(row: EventRow) -> int:
    """About how many events ``row`` holds (a packed row's lines after the header: an
    UPDATE written as COPY lines counts twice), to size the next fetch."""
    if row[3] == PACKED_EVENT and isinstance(row[4], str):
        return int(row[4].count("\n"))
    return 1


def flattened(items: Sequence[Any]) -> Sequence[EventRow]:
    """``items`` with every ``PackedRun`` replaced by its events."""
    if not any(item.__class__ is PackedRun for item in items):
        return items
    events: list[EventRow] = []
    for item in items:
        if item.__class__ is PackedRun:
            events.extend(item.events())
        else:
            events.append(item)
    return events
