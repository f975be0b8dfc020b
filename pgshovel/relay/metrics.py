"""The relay's figures, and the Prometheus series made of them (``pgshovel_relay_*``).

Lag is the age of the oldest change not yet published, in seconds, and it is
honest while the relay is stuck: when a batch is taken its oldest change's age
is noted (``pending_since``) and kept until the batch is finished, so with
Kafka down the gauge grows with every scrape; where the backlog is served, the
gauge is also at least the age of the oldest committed event no finished batch
holds (a batch not taken yet); once the queue is drained the lag is 0. A
change's time is bounded below by the batch's start tick (it
committed after that tick) and by its event time (its transaction's start):
the later of the two is used, so neither a long idle period nor a long
transaction inflates it. A batch that held no event leaves the last batch's lag as
it was and nothing pending (its start tick may be a minute old: PgQ's idle ticks).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pgshovel.metrics import Delivery, Readiness, Series


@dataclass
class RelayMetrics(Delivery):
    """Counters and gauges; updated by the relay loop, read by the HTTP thread."""

    batches: int = 0
    events: int = 0
    bytes: int = 0
    rollbacks: int = 0
    last_tick: float = field(default_factory=time.time)
    epoch: int = 0
    leader: bool = False
    #: mutations published per (schema, table)
    tables: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: reads the queue's backlog when scraped (NaN when it cannot); None: not served
    backlog: Callable[[], float] | None = None
    #: the bound of the oldest waiting event's age, read when scraped; None: not served
    backlog_age: Callable[[], float | None] | None = None
    #: a batch is being published (a long one is no sign of a stuck relay)
    publishing: bool = False

    def taken(self, start_tick_seconds: float) -> None:
        """A batch was taken; its changes committed after its start tick."""
        if self.pending_since is None:
            self.pending_since = start_tick_seconds or time.time()

    def refine(self, oldest_event_seconds: float, start_tick_seconds: float) -> None:
        """The batch's oldest event time is known: pending since the later of the two bounds."""
        self.pending_since = max(oldest_event_seconds, start_tick_seconds)

    def published(self) -> float:
        """The pending batch is finished; returns (and keeps) its lag."""
        return self.delivered()

    def nothing_published(self) -> float:
        """The batch held no event: nothing was pending; the last batch's lag stays."""
        self.pending_since = None
        return 0.0

    def lag_gauge(self) -> float:
        """The lag served: also the age of the oldest committed event no batch taken holds
        yet, so the gauge grows while the relay is stuck before it takes that batch (behind
        a batch without events that Kafka does not take, say)."""
        lag = self.lag_seconds()
        age = None if self.backlog_age is None else self.backlog_age()
        return lag if age is None else max(lag, age)

    def readiness(self) -> Readiness:
        """Ready while leading, with the last step through (see ``Delivery.step_readiness``)."""
        if not self.leader:
            return False, "not leading (standing by)"
        return self.step_readiness(True, self.publishing)

    def series(self) -> list[Series]:
        return [
            Series("batches_total", "counter", "Batches published and finished.", self._batches),
            Series("events_total", "counter", "Mutations published.", self._events),
            Series(
                "table_mutations_total",
                "counter",
                "Mutations published, per table.",
                self._tables,
                ("schema", "table"),
            ),
            Series(
                "backlog_events",
                "gauge",
                "Committed events in the queue no finished batch holds (counted when scraped).",
                self._backlog,
            ),
            Series("bytes_total", "counter", "Bytes published to Kafka.", self._bytes),
            Series("rollbacks_total", "counter", "Rollback messages published.", self._rollbacks),
            *self.delivery_series(
                "lag_seconds",
                "Age of the oldest change not yet published (0 when the queue is drained).",
                "Age of the last published batch's oldest change when it was published.",
            ),
            Series(
                "last_tick_age_seconds",
                "gauge",
                "Seconds since this relay last made a tick.",
                self._tick_age,
            ),
            Series("epoch", "gauge", "Fencing epoch of this relay.", self._epoch),
            Series("leader", "gauge", "1 while this relay publishes.", self._leader),
        ]

    def _batches(self) -> float:
        return self.batches

    def _tables(self) -> list[tuple[tuple[str, ...], float]]:
        return [(key, float(count)) for key, count in sorted(self.tables.items())]

    def _backlog(self) -> float:
        return float("nan") if self.backlog is None else self.backlog()

    def _events(self) -> float:
        return self.events

    def _bytes(self) -> float:
        return self.bytes

    def _rollbacks(self) -> float:
        return self.rollbacks

    def _tick_age(self) -> float:
        return time.time() - self.last_tick

    def _epoch(self) -> float:
        return self.epoch

    def _leader(self) -> float:
        return int(self.leader)
