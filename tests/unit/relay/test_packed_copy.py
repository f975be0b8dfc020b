"""Packed rows of COPY lines (ext/packing.c, contract 5) read as the JSON packs of the same changes.

A pack's changes of a table captured without provenance are COPY lines of the table's
columns. Expanded (``unpacked``), they are the events the JSON pack of the same changes
gives, their data parsed; asked for as runs (``unpacked(..., runs=True)``), they come as
``PackedRun``s in the place of their changes (a run's ids are consecutive: other
transactions' changes come before or after it). The relay forwards a run's lines as they
are (``RowsEncoder.encode_packed``): the framed bytes, and the errors, are those of
framing the JSON events one by one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import CodecError, PgshovelError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.events import QueueEventDecoder
from pgshovel.relay.framing import RUN_EVENTS, RowFramer
from pgshovel.relay.packed_run import PackedRun
from pgshovel.relay.packing import PACKED_EVENT, expand, flattened, unpacked
from pgshovel.relay.schema import SchemaTracker
from tests.unit.relay.test_events import Catalog, History
from tests.unit.relay.test_packing import pack
from tests.unit.relay.test_rows_runs import TABLES, TIME, OneByOne, _framed

#: the shapes of tests.unit.relay.test_rows_runs's catalog, and one column list it lacks
COLUMNS = {
    ("public", "t"): ("id", "status", "note"),
    ("public", "u"): ("id", "note"),
}
OTHER_ORDER = ("id", "note", "status")
VALUES = st.one_of(
    st.none(),
    st.text(alphabet="ab\t\n\r\\é✓\x0b ", max_size=6),
    st.sampled_from(["\\N", "", "N", "\\\\N"]),
)


def _parsed(event: tuple[Any, ...], copied: dict[tuple[str, str], Any]) -> tuple[Any, ...]:
    """``event`` as the expansion of a pack gives it: data parsed where it was a COPY line."""
    if (event[5], event[6]) in copied and event[3] != "T":
        return (*event[:4], json.loads(event[4])[:2], *event[5:])
    return event


@st.composite
def transactions(draw: st.DrawFn) -> tuple[list[tuple[Any, ...]], dict[Any, Any]]:
    """Changes of interleaved transactions (ids in capture order), JSON data, every row with
    every column of its table."""
    copied = {
        table: columns
        for table, columns in COLUMNS.items()
        if draw(st.integers(0, 3)) > 0  # mostly COPY lines, sometimes JSON
    }
    # one key, two (a NULL among them is "\\N" to the router), or none
    keys = {table: draw(st.sampled_from(['["id"]', '["note", "id"]', "[]"])) for table in COLUMNS}
    events = []
    for event_id in range(1, draw(st.integers(1, 40)) + 1):
        txid = draw(st.integers(100, 103))
        table = draw(st.sampled_from(sorted(COLUMNS)))
        kind = draw(st.sampled_from("IIUUDT"))
        rows = []
        for present in (kind in "UD", kind in "IU"):
            row = None
            if present:
                row = {column: draw(VALUES) for column in COLUMNS[table]}
                row["id"] = str(event_id)
            rows.append(row)
        data = json.dumps(rows)
        events.append((event_id, TIME + txid, txid, kind, data, *table, "v1", keys[table]))
    return events, copied


def _rows(
    events: list[tuple[Any, ...]], copied: dict[Any, Any], draw: Callable[..., Any]
) -> list[list[tuple[Any, ...]]]:
    """Each transaction's changes packed in pieces, the rows in ``ev_id`` order, in chunks."""
    by_transaction: dict[int, list[tuple[Any, ...]]] = {}
    for event in events:
        by_transaction.setdefault(event[2], []).append(event)
    rows = []
    for changes in by_transaction.values():
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(changes) - 1)), max_size=3)))
        for start, end in zip([0, *cuts], [*cuts, len(changes)], strict=True):
            if start < end:
                rows.append(pack(changes[start:end], copied))
    rows.sort(key=lambda row: row[0])
    size = draw(st.integers(1, 5))
    return [rows[i : i + size] for i in range(0, len(rows), size)]


@settings(deadline=None, max_examples=300)
@given(transactions(), st.data())
def test_copy_packs_expand_to_the_events_of_json_packs(case: Any, data: st.DataObject) -> None:
    events, copied = case
    chunks = _rows(events, copied, data.draw)
    expected = [_parsed(event, copied) for event in events]
    assert [event for chunk in unpacked(chunks) for event in chunk] == expected
    items = [item for chunk in unpacked(chunks, runs=True) for item in chunk]
    # runs in the place of their changes, never overlapping another item's ids
    ends = [item[0] + (item.size if isinstance(item, PackedRun) else 1) for item in items]
    assert all(end <= item[0] for end, item in zip(ends, items[1:], strict=False))
    assert list(flattened(items)) == expected


@settings(deadline=None, max_examples=200)
@given(transactions(), st.sampled_from([300, 2_000, 1_000_000]), st.integers(1, 6), st.data())
def test_copy_runs_frame_the_bytes_of_json_events_one_by_one(
    case: Any, limit: int, chunk: int, data: st.DataObject
) -> None:
    events, copied = case
    if data.draw(st.booleans()):  # a pack whose columns are not the shape's: never forwarded
        copied = {
            table: OTHER_ORDER if table == ("public", "t") else columns
            for table, columns in copied.items()
        }
    rows = [row for piece in _rows(events, copied, data.draw) for row in piece]
    items = [item for part in unpacked([rows], runs=True) for item in part]
    assert _framed(RowFramer, items, limit, chunk) == _framed(OneByOne, events, limit, 10_000)


def _on_partitions(
    items: Sequence[Any], partitions: int, limit: int
) -> tuple[list[Any], str | None]:
    """(partition, operation bytes) of everything framed for ``items`` on ``partitions``
    partitions, and the error if any."""
    tracker = SchemaTracker(Catalog(dict(TABLES)), History(), "s")  # type: ignore[arg-type]
    framer = RowFramer(QueueEventDecoder(tracker), 1, partitions, limit)
    framer.begin(stream_pb2.BatchIdentifier(id=1), stream_pb2.Tick(), stream_pb2.Tick(), "v1")
    framed: list[Any] = []
    try:
        framer.add(items)
        framer.commit()
    except PgshovelError as error:
        return framed, f"{type(error).__name__}: {error}"
    messages, where = framer.take()
    framed.extend(zip(where, (m.operation.SerializeToString() for m in messages), strict=True))
    return framed, None


@settings(deadline=None, max_examples=150)
@given(transactions(), st.integers(2, 5), st.sampled_from([150, 400, 2_000]), st.data())
def test_copy_runs_go_to_the_partitions_of_their_keys(
    case: Any, partitions: int, limit: int, data: st.DataObject
) -> None:
    events, copied = case
    rows = [row for piece in _rows(events, copied, data.draw) for row in piece]
    items = [item for part in unpacked([rows], runs=True) for item in part]
    assert _on_partitions(items, partitions, limit) == _on_partitions(events, partitions, limit)


def test_runs_come_between_the_changes_of_other_transactions() -> None:
    mine = [
        (
            i,
            TIME,
            7,
            "I",
            json.dumps([None, {"id": str(i), "note": "x"}]),
            "public",
            "u",
            "v1",
            "[]",
        )
        for i in (1, 2, 3, 6, 7)
    ]
    other = [
        (
            i,
            TIME,
            8,
            "D",
            json.dumps([{"id": str(i), "note": None}, None]),
            "public",
            "u",
            "v1",
            "[]",
        )
        for i in (4, 5)
    ]
    copied = {("public", "u"): ("id", "note")}
    items = [
        item
        for chunk in unpacked([[pack(mine, copied), pack(other, copied)]], runs=True)
        for item in chunk
    ]
    assert [(item.id, item.size, item.type) for item in items] == [
        (1, 3, "I"),
        (4, 2, "D"),
        (6, 2, "I"),
    ]
    assert items[2].lines == [b"6\tx", b"7\tx"] and items[1].lines == [b"4\t\\N", b"5\t\\N"]


def test_a_long_copy_run_is_framed_in_pieces_and_messages_end_where_they_would() -> None:
    events = [
        (
            n,
            TIME,
            5,
            "U",
            json.dumps([{"id": str(n), "note": ""}, {"id": str(n), "note": f"n{n}"}]),
            "public",
            "u",
            "v1",
            '["id"]',
        )
        for n in range(1, 3 * RUN_EVENTS + 8)
    ]
    (row,) = [pack(events, {("public", "u"): ("id", "note")})]
    (items,) = unpacked([[row]], runs=True)
    assert [(item.id, item.size) for item in items] == [(1, 3 * RUN_EVENTS + 7)]
    for limit in (5_000, 33_333, 1_000_000):
        framed, error = _framed(RowFramer, items, limit, 1)
        assert error is None
        assert framed == _framed(OneByOne, events, limit, len(events))[0]


def _copy_row(header: str, *lines: str) -> tuple[Any, ...]:
    return (9, TIME, 1, PACKED_EVENT, "\n".join([header, *lines]), None, None, None, None)


@pytest.mark.parametrize(
    ("header", "lines", "why"),
    [
        ('[[["s","t","v","[]","[\\"a\\""]],[[9,1,"I",0]]]', ["1"], "has columns"),
        ('[[["s","t","v","[]","{}"]],[[9,1,"I",0]]]', ["1"], "expected a JSON array of names"),
        ('[[["s","t","v","[]","[\\"a\\"]"]],[[9,1,"T",0]]]', [""], "expected an I, U or D run"),
        ('[[["s","t","v","[]","[\\"a\\"]"]],[[9,2,"U",0]]]', ["1", "2", "3"], "fewer than"),
        ('[[["s","t","v","[]","[\\"a\\"]"]],[[9,1,"U",0]]]', ["1", "2", "3"], "runs for 2"),
    ],
)
def test_a_copy_pack_that_is_not_what_the_trigger_writes_is_an_error(
    header: str, lines: list[str], why: str
) -> None:
    with pytest.raises(CodecError, match=f"packed event 9 .*{why}"):
        expand(_copy_row(header, *lines))


def test_a_line_of_another_width_is_an_error_naming_its_packed_row() -> None:
    row = _copy_row('[[["s","t","v","[]","[\\"a\\",\\"b\\"]"]],[[9,2,"I",0]]]', "1\tx", "2")
    (run,) = expand(row, runs=True)
    assert isinstance(run, PackedRun) and run.lines == [b"1\tx", b"2"]
    with pytest.raises(
        CodecError,
        match=r"packed event 9 \(changes 9 to 10 of table 's'.'t'\) "
        r"has a line of 1 fields for its 2 columns",
    ):
        expand(row)
