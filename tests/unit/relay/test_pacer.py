"""The relay's ticker: events committed after the last tick's snapshot are ticked for at once.

PgQ ticks for new events, else only after its idle period; the events of a
transaction in progress at a tick belong to no batch until a later tick, so
the pacer ticks as soon as such events have committed. It watches the tick's
transactions in progress, each until it finishes.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.relay import Pacer


class Ticks:
    """A queue's ticker as the pacer sees it: what each call returns, and what was called."""

    queue = "pgshovel.test.set"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ticks: list[int | None] = []
        self.latest = 1
        #: the in-progress transactions of each tick's snapshot
        self.open_at: dict[int, tuple[int, ...]] = {}
        #: transactions committed with events, and finished without
        self.committed: set[int] = set()
        self.finished: set[int] = set()

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
        xip = self.open_at.get(self.latest, ())
        return f"{min(xip, default=90)}:99:{','.join(str(x) for x in xip)}"

    def committed_after(
        self, snapshot: str, watched: Sequence[int]
    ) -> tuple[bool, tuple[int, ...]]:
        self.calls.append(f"look {sorted(watched)}")
        done = self.committed | self.finished
        return bool(self.committed & set(watched)), tuple(t for t in watched if t not in done)


def _pacer(ticks: Ticks) -> Pacer:
    pacer = Pacer(ticks, 0.05, RelayMetrics())  # type: ignore[arg-type]
    pacer.interval = 1e-9  # every call may tick
    return pacer


def test_a_commit_after_the_last_tick_is_ticked_for_without_new_events() -> None:
    ticks = Ticks()
    ticks.ticks = [5]
    ticks.open_at[5] = (91, 92)  # 91 wrote events before tick 5; 92 is unrelated
    pacer = _pacer(ticks)
    pacer.maybe_tick()  # PgQ ticks (new events): tick 5
    pacer.maybe_tick()  # nothing committed since: no tick
    assert ticks.calls == ["tick", "tick", "snapshot", "look [91, 92]"]
    ticks.finished.add(92)  # 92 ends without events: no tick, and no longer watched
    pacer.maybe_tick()
    pacer.maybe_tick()
    assert ticks.calls[-3:] == ["look [91, 92]", "tick", "look [91]"]
    ticks.committed.add(91)  # 91 commits its events: tick now, not at PgQ's idle period
    pacer.maybe_tick()
    assert ticks.calls[-2:] == ["look [91]", "force"]
    pacer.maybe_tick()  # the new tick's snapshot is read again
    assert ticks.calls[-3:] == ["tick", "snapshot", "look []"]


def test_no_ticks_when_pgqd_ticks() -> None:
    ticks = Ticks()
    Pacer(ticks, 0, RelayMetrics()).maybe_tick()  # type: ignore[arg-type]
    assert ticks.calls == []
