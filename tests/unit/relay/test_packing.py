"""Packed queue rows expanded and merged back into event id order (pgshovel.relay.packing)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import CodecError
from pgshovel.relay.packing import PACKED_EVENT, events_in, expand, unpacked
from pgshovel.stream.rows import copy_line

TIME = 1_700_000_000_000_000
TABLES = [
    ("public", "accounts", "v1", '["aid"]'),
    ('Odd "schema"\n', "t\\able", "v1", '["k", "ключ"]'),
]


def _event(event_id: int, txid: int, kind: str, table: int) -> tuple[Any, ...]:
    schema, name, version, keys = TABLES[table]
    data = json.dumps([None, {"k": str(event_id), "text": 'a\nb"c'}])
    return (event_id, TIME, txid, kind, data, schema, name, version, keys)


def pack(
    events: Sequence[tuple[Any, ...]], copied: dict[tuple[str, str], Any] | None = None
) -> tuple[Any, ...]:
    """The row ext/packing.c writes for ``events`` (one transaction's, JSON data, in id
    order); the changes of a table of ``copied`` (its line columns) as COPY lines (an
    UPDATE two: old, new; a TRUNCATE stays JSON)."""
    copied = copied or {}
    if len(events) == 1 and (events[0][5], events[0][6]) not in copied:
        return events[0]
    tables: list[list[str]] = []
    runs: list[list[Any]] = []
    lines: list[bytes] = []
    for event in events:
        table = list(event[5:9])
        columns = copied.get((event[5], event[6]))
        if columns is not None and event[3] != "T":
            table.append(json.dumps(list(columns)))
            rows = [row for row in json.loads(event[4])[:2] if row is not None]
            lines.extend(copy_line(row[column] for column in columns) for row in rows)
        else:
            lines.append(event[4].encode())
        if table not in tables:
            tables.append(table)
        index = tables.index(table)
        last = runs[-1] if runs else None
        if last and last[0] + last[1] == event[0] and last[2] == event[3] and last[3] == index:
            last[1] += 1
        else:
            runs.append([event[0], 1, event[3], index])
    header = json.dumps([tables, runs], ensure_ascii=False).encode()
    data = b"\n".join([header, *lines]).decode()
    return (events[0][0], events[0][1], events[0][2], PACKED_EVENT, data, None, None, None, None)


def _flat(chunks: Sequence[Sequence[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    return [event for chunk in unpacked(chunks) for event in chunk]


def test_a_packed_row_holds_its_changes_with_their_own_ids_and_tables() -> None:
    events = [
        _event(10, 7, "U", 0),
        _event(11, 7, "U", 0),
        _event(14, 7, "I", 1),
        _event(15, 7, "D", 1),
    ]
    row = pack(events)
    assert json.loads(row[4].split("\n")[0])[1] == [
        [10, 2, "U", 0],
        [14, 1, "I", 1],
        [15, 1, "D", 1],
    ]
    assert expand(row) == events
    assert events_in(row) == 4 and events_in(events[0]) == 1


def test_events_of_other_rows_between_a_packed_rows_ids_come_between() -> None:
    # Transaction 7 captured ids 1, 4 and 6; a schema event of it took 5, transaction 8
    # ids 2 and 3 (packed), a watermark 7.
    mine = [_event(1, 7, "U", 0), _event(4, 7, "U", 0), _event(6, 7, "I", 1)]
    other = [_event(2, 8, "U", 0), _event(3, 8, "U", 0)]
    schema = (5, TIME, 7, "S", "{}", "public", "accounts", "v1", '["aid"]')
    watermark = (7, TIME, 9, "W", "mark", "public", "accounts", None, None)
    rows = [pack(mine), pack(other), schema, watermark]
    expected = sorted([*mine, *other, schema, watermark])
    for size in (1, 2, 4):
        chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
        assert _flat(chunks) == expected


def test_a_batch_without_packed_rows_passes_through_as_it_was_read() -> None:
    rows = [_event(i, 3, "I", 0) for i in range(1, 6)]
    assert list(unpacked([rows[:2], rows[2:]])) == [rows[:2], rows[2:]]


@st.composite
def _queues(draw: st.DrawFn) -> tuple[list[list[tuple[Any, ...]]], list[tuple[Any, ...]]]:
    """Transactions capturing interleaved (ids in capture order), each packing its changes in
    chunks, with other events between; the rows as PgQ orders them, in fetch chunks."""
    steps = draw(
        st.lists(
            st.tuples(st.integers(0, 4), st.sampled_from("IUDTS"), st.integers(0, 1)),
            min_size=1,
            max_size=60,
        )
    )
    captured: dict[int, list[tuple[Any, ...]]] = {}
    rows: list[tuple[Any, ...]] = []
    expected: list[tuple[Any, ...]] = []
    for event_id, (txid, kind, table) in enumerate(steps, start=1):
        if kind == "S":  # a schema event or a watermark: its own row, at once
            row = (event_id, TIME, txid, "S", "{}", "public", "t", "v", "[]")
            rows.append(row)
            expected.append(row)
            continue
        event = _event(event_id, txid, kind, table)
        expected.append(event)
        captured.setdefault(txid, []).append(event)
    for changes in captured.values():
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(changes) - 1)), max_size=3)))
        for start, end in zip([0, *cuts], [*cuts, len(changes)], strict=True):
            if start < end:
                rows.append(pack(changes[start:end]))
    rows.sort(key=lambda row: row[0])
    size = draw(st.integers(1, 8))
    return [rows[i : i + size] for i in range(0, len(rows), size)], expected


@settings(deadline=None, max_examples=300)
@given(_queues())
def test_unpacking_restores_exactly_the_unpacked_queue(
    queue: tuple[list[list[tuple[Any, ...]]], list[tuple[Any, ...]]],
) -> None:
    chunks, expected = queue
    assert _flat(chunks) == expected


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (None, "has no data"),
        ("not json\n[null,{}]", "header that is not JSON"),
        ('{"a": 1}\n[null,{}]', "expected \\[tables, runs\\]"),
        ('[[["s","t","v"]],[[9,1,"I",0]]]\n[null,{}]', "expected \\[schema, table"),
        ('[[["s","t","v","[]"]],[[9,1,"I",1]]]\n[null,{}]', "expected \\[first id"),
        ('[[["s","t","v","[]"]],[[9,2,"I",0]]]\n[null,{}]', "fewer than its runs take"),
        ('[[["s","t","v","[]"]],[[9,1,"I",0]]]\n[null,{}]\n[null,{}]', "runs for 1"),
        ('[[["s","t","v","[]"]],[[10,1,"I",0]]]\n[null,{}]', "starting at id 10"),
        ('[[["s","t","v","[]"]],[[9,1,"I",0],[9,1,"I",0]]]\n[null,{}]\n[null,{}]', "after id 9"),
    ],
)
def test_a_row_that_is_not_what_the_trigger_writes_is_an_error(data: Any, why: str) -> None:
    row = (9, TIME, 1, PACKED_EVENT, data, None, None, None, None)
    with pytest.raises(CodecError, match=f"packed event 9 .*{why}"):
        list(unpacked([[row]]))
