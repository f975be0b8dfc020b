"""Snapshot handoff: snapshot text, visibility, and the filter that drops what the load holds."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.handoff import HandoffFilter, Snapshot, is_visible, parse_txid_snapshot
from tests._positions import after, last_offset

NODE = uuid.UUID(int=0xA).bytes


@pytest.mark.parametrize(
    ("text", "snapshot"),
    [
        ("10:20:12,15", Snapshot(10, 20, frozenset({12, 15}))),
        ("10:20:", Snapshot(10, 20)),
        ("748:748:", Snapshot(748, 748)),
        (" 5:9:5 \n", Snapshot(5, 9, frozenset({5}))),
    ],
)
def test_parse_postgresql_snapshot_text(text: str, snapshot: Snapshot) -> None:
    assert parse_txid_snapshot(text) == snapshot


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("10:20", "expected three fields"),
        ("a:20:", "invalid literal"),
        ("20:10:", "xmin <= xmax"),
        ("10:20:25", "must lie in [xmin, xmax) = [10, 20), got [25]"),
        ("10:20:12,,13", "invalid literal"),
    ],
)
def test_unparseable_snapshot_names_text_and_expected_form(text: str, problem: str) -> None:
    with pytest.raises(StreamError) as raised:
        parse_txid_snapshot(text)
    message = str(raised.value)
    assert f"cannot parse transaction snapshot {text!r}" in message
    assert problem in message
    assert "'xmin:xmax:xip,...'" in message
    assert isinstance(raised.value.__cause__, ValueError)


def test_visibility_rules() -> None:
    snapshot = Snapshot(10, 20, frozenset({12, 15}))
    assert [is_visible(txid, snapshot) for txid in (9, 10, 12, 13, 15, 19, 20, 21)] == [
        True,
        True,
        False,
        True,
        False,
        True,
        False,
        False,
    ]


def test_snapshot_from_a_tick_on_the_stream() -> None:
    tick = stream_pb2.Snapshot(xmin=3, xmax=8, xip=[4, 6])
    assert Snapshot.from_protobuf(tick) == Snapshot(3, 8, frozenset({4, 6}))


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    xmin = draw(st.integers(1, 2**40))
    xmax = xmin + draw(st.integers(0, 50))
    xip = draw(st.frozensets(st.integers(xmin, xmax - 1))) if xmax > xmin else frozenset()
    return Snapshot(xmin, xmax, xip)


@given(snapshots())
def test_snapshot_text_round_trips(snapshot: Snapshot) -> None:
    assert parse_txid_snapshot(snapshot.to_text()) == snapshot


@given(snapshots(), st.integers(1, 2**40 + 100))
def test_visible_exactly_when_committed_before_the_snapshot(snapshot: Snapshot, txid: int) -> None:
    visible = is_visible(txid, snapshot)
    if txid < snapshot.xmin:
        assert visible
    elif txid >= snapshot.xmax or txid in snapshot.xip:
        assert not visible
    else:
        assert visible


@given(snapshots(), st.data())
def test_a_later_snapshot_sees_everything_an_earlier_one_saw(
    snapshot: Snapshot, data: st.DataObject
) -> None:
    # Some in-progress transactions finish and new ones start: nothing becomes invisible.
    finished = (
        data.draw(st.frozensets(st.sampled_from(sorted(snapshot.xip))))
        if snapshot.xip
        else frozenset()
    )
    later_xmax = snapshot.xmax + data.draw(st.integers(0, 10))
    started = data.draw(st.frozensets(st.integers(snapshot.xmax, later_xmax))) - {later_xmax}
    still = (snapshot.xip - finished) | started
    later = Snapshot(min(still, default=later_xmax), later_xmax, frozenset(still))
    for txid in range(max(1, snapshot.xmin - 2), later_xmax + 2):
        if is_visible(txid, snapshot):
            assert is_visible(txid, later), txid


def mutation(
    txid: int, operation: stream_pb2.Mutation.Operation = stream_pb2.Mutation.INSERT
) -> stream_pb2.Mutation:
    return stream_pb2.Mutation(
        id=txid, schema="public", table="t", operation=operation, transaction=txid
    )


def committed(number: int, start_xmin: int, txids: list[int]) -> CommittedBatch:
    start = stream_pb2.Tick(
        id=number, snapshot=stream_pb2.Snapshot(xmin=start_xmin, xmax=start_xmin + 1)
    )
    return CommittedBatch(
        node=NODE,
        batch_id=number,
        begin=stream_pb2.Begin(start=start),
        mutations=tuple(mutation(txid) for txid in txids),
        position=after(number * 10, sequence=number),
    )


def transactions(batch: CommittedBatch) -> list[int]:
    return [m.transaction for m in batch.mutations]


def test_filter_drops_what_the_snapshot_holds_until_batches_start_after_it() -> None:
    handoff = HandoffFilter(parse_txid_snapshot("100:110:103,107"))
    first = handoff.filter(committed(1, 95, [98, 103, 105, 107, 110]))
    assert transactions(first) == [103, 107, 110]
    assert last_offset(first.position) == 10
    assert handoff.active
    emptied = handoff.filter(committed(2, 101, [101, 104]))
    assert transactions(emptied) == []
    assert last_offset(emptied.position) == 20
    assert emptied.batch_id == 2
    after = committed(3, 110, [111, 112])
    assert handoff.filter(after) is after
    assert not handoff.active
    # From then on nothing is dropped, not even a (bogus) old transaction id.
    assert transactions(handoff.filter(committed(4, 120, [5]))) == [5]


def test_filter_treats_truncate_like_any_mutation() -> None:
    handoff = HandoffFilter(Snapshot(100, 110))
    batch = committed(1, 99, [])
    batch = CommittedBatch(
        node=batch.node,
        batch_id=batch.batch_id,
        begin=batch.begin,
        mutations=(
            mutation(99, stream_pb2.Mutation.TRUNCATE),
            mutation(110, stream_pb2.Mutation.TRUNCATE),
        ),
        position=batch.position,
    )
    assert transactions(handoff.filter(batch)) == [110]


def test_filter_returns_an_untouched_batch_as_is() -> None:
    handoff = HandoffFilter(Snapshot(100, 110))
    batch = committed(1, 99, [110, 111])
    assert handoff.filter(batch) is batch
    assert handoff.active


def test_mutation_without_transaction_id_is_an_error() -> None:
    handoff = HandoffFilter(Snapshot(100, 110))
    with pytest.raises(StreamError, match=r"mutation 0 on 'public'\.'t' in batch 1 \(offset 10\)"):
        handoff.filter(committed(1, 99, [0]))


@given(snapshots(), st.lists(st.lists(st.integers(1, 2**40 + 100), max_size=5), max_size=6))
def test_filter_keeps_exactly_the_invisible_mutations_while_active(
    snapshot: Snapshot, batches: list[list[int]]
) -> None:
    handoff = HandoffFilter(snapshot)
    for number, txids in enumerate(batches, start=1):
        kept = handoff.filter(committed(number, 1, txids))
        assert transactions(kept) == [t for t in txids if not is_visible(t, snapshot)]
        assert last_offset(kept.position) == number * 10


def test_schema_changes_the_snapshot_saw_are_dropped_and_marker_positions_follow() -> None:
    handoff = HandoffFilter(parse_txid_snapshot("100:110:103,107"))
    seen = stream_pb2.SchemaChange(id=1, transaction=101)
    unseen = stream_pb2.SchemaChange(id=2, transaction=107)
    mark = stream_pb2.Watermark(id=3, request="r:0:high", transaction=99)
    batch = dataclasses.replace(
        committed(1, 95, [101, 103, 105, 107]), markers=((1, seen), (2, unseen), (4, mark))
    )
    filtered = handoff.filter(batch)
    assert transactions(filtered) == [103, 107]
    # 101 and 105 are gone: "after 2 mutations" is now "after 1"; watermarks always pass.
    assert [(position, marker.id) for position, marker in filtered.markers] == [(1, 2), (2, 3)]
