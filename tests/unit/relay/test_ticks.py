"""PgQ tick rows become protocol Ticks with their txid snapshots."""

from __future__ import annotations

from pgshovel.abc import TickInfo
from pgshovel.relay.relay import _tick_message


def test_snapshot_with_in_progress_transactions() -> None:
    tick = _tick_message(TickInfo(7, "100:105:101,103", 1_700_000_000_000_000))
    assert tick.id == 7
    assert tick.timestamp == 1_700_000_000_000_000
    assert (tick.snapshot.xmin, tick.snapshot.xmax) == (100, 105)
    assert list(tick.snapshot.xip) == [101, 103]


def test_snapshot_without_in_progress_transactions() -> None:
    tick = _tick_message(TickInfo(1, "5:5:", 0))
    assert (tick.snapshot.xmin, tick.snapshot.xmax, list(tick.snapshot.xip)) == (5, 5, [])
