"""The relay's ticker: events committed after the last tick's snapshot are ticked for at once.

PgQ ticks for new events, else only after its idle period; the events of a
transaction in progress at a tick belong to no batch until a later tick, so
the pacer ticks as soon as such events have committed.
"""

from __future__ import annotations

import time

from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.relay import Pacer


class Ticks:
    """A queue's ticker as the pacer sees it: what each call returns, and what was called."""

    queue = "pgshovel.test.set"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ticks: list[int | None] = []
        self.latest = 1
        #: whether events committed after the snapshot of each tick
        self.late: set[int] = set()

    def tick(self) -> int | None:
        self.calls.append("tick")
        made = self.ticks.pop(0) if self.ticks else None
        if made is not None:
            self.latest = made
        return made

    def force_tick(self) -> int:
        self.calls.append("force")
        self.latest += 1
        return self.latest

    def last_tick_snapshot(self) -> str:
        self.calls.append("snapshot")
        return f"tick {self.latest}"

    def committed_after(self, snapshot: str) -> bool:
        self.calls.append(f"look after {snapshot}")
        return int(snapshot.split()[1]) in self.late


def _pacer(ticks: Ticks) -> Pacer:
    pacer = Pacer(ticks, 0.05, RelayMetrics())  # type: ignore[arg-type]
    pacer.interval = 1e-9  # every call may tick
    return pacer


def test_a_commit_after_the_last_tick_is_ticked_for_without_new_events() -> None:
    ticks = Ticks()
    ticks.ticks = [5]
    pacer = _pacer(ticks)
    pacer.maybe_tick()  # PgQ ticks (new events): tick 5
    pacer.maybe_tick()  # nothing committed after tick 5: no tick
    pacer.maybe_tick()
    assert ticks.calls == [
        "tick",
        "tick",
        "snapshot",
        "look after tick 5",
        "tick",
        "look after tick 5",
    ]
    ticks.late.add(5)  # a transaction open at tick 5 commits its events: tick now
    pacer.maybe_tick()
    assert ticks.calls[-2:] == ["look after tick 5", "force"]
    pacer.maybe_tick()  # the snapshot of the new tick is read again
    assert ticks.calls[-3:] == ["tick", "snapshot", "look after tick 6"]


def test_no_ticks_when_pgqd_ticks() -> None:
    ticks = Ticks()
    Pacer(ticks, 0, RelayMetrics()).maybe_tick()  # type: ignore[arg-type]
    assert ticks.calls == []


def test_the_loop_sleeps_no_longer_than_until_the_next_tick() -> None:
    ticks = Ticks()
    ticks.ticks = [5]
    pacer = Pacer(ticks, 0.05, RelayMetrics())  # type: ignore[arg-type]
    pacer.maybe_tick()
    # Just ticked: the next tick is due in 50 ms, more than a 20 ms poll.
    assert 0.0 < pacer.pause(0.02) <= 0.02
    pacer._next = time.monotonic() + 0.005  # due in 5 ms: sleep at most that
    assert pacer.pause(0.02) <= 0.005
    pacer._next = time.monotonic() - 1  # overdue: do not sleep
    assert pacer.pause(0.02) == 0.0
    assert Pacer(ticks, 0, RelayMetrics()).pause(0.02) == 0.02  # type: ignore[arg-type]
