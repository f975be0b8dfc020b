"""The relay's status in ZooKeeper, for the console: one ephemeral node per running relay.

``/<cluster>/sets/<set>/relays/<host:pid:id>`` (the name is the relay's
identifier in the election) holds a small JSON document: leading or standing
by, the epoch, lag, counters, the last hour's lag and events/s, the last
errors, when it was written. A thread rewrites it every ``interval`` seconds
from the figures the relay loop keeps (``RelayMetrics``, read without a lock
as the metrics endpoint reads them), so a relay blocked on Kafka or the source
still shows its growing lag. ZooKeeper being unavailable costs one warning,
never the relay; ``close()`` removes the node.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from pgshovel.cluster import names
from pgshovel.cluster.status import write_status
from pgshovel.errors import PgshovelError
from pgshovel.relay.metrics import RelayMetrics

logger = logging.getLogger(__name__)

INTERVAL_SECONDS = 1.0


def relay_status_document(metrics: RelayMetrics, started: float, now: float) -> dict[str, Any]:
    """What the console shows of one relay (pure)."""
    return {
        "role": "leader" if metrics.leader else "standby",
        "epoch": metrics.epoch,
        "lag_seconds": round(metrics.lag_seconds(now), 3),
        "batch_lag_seconds": round(metrics.batch_lag_seconds, 3),
        "batches": metrics.batches,
        "events": metrics.events,
        "bytes": metrics.bytes,
        "rollbacks": metrics.rollbacks,
        "last_tick_age_seconds": round(max(0.0, now - metrics.last_tick), 3),
        "started": started,
        "updated": now,
        "history": metrics.history.document(),
        "errors": metrics.errors,
        "recent_errors": metrics.recent_errors.document(),
    }


class RelayStatusBoard:
    """Writes one relay's status node from a thread; ``close()`` stops it and removes the node."""

    def __init__(
        self,
        zookeeper: KazooClient,
        cluster: str,
        set_name: str,
        identifier: str,
        metrics: RelayMetrics,
        interval: float = INTERVAL_SECONDS,
    ) -> None:
        self._zookeeper = zookeeper
        self._parent = names.relays_path(cluster, set_name)
        self.path = f"{self._parent}/{identifier}"
        self.metrics = metrics
        self.interval = interval
        self.started = time.time()
        self._stop = threading.Event()
        self._warned = False
        self._events = 0
        self._thread = threading.Thread(target=self._run, name="relay status", daemon=True)

    def start(self) -> RelayStatusBoard:
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self.publish()
            if self._stop.wait(self.interval):
                return

    def publish(self) -> None:
        now = time.time()
        metrics = self.metrics
        # A batch with events published since the last look: its lag counts too (the age of
        # its oldest change when Kafka acknowledged it), or a catch-up would not show.
        fresh = metrics.events != self._events
        self._events = metrics.events
        lag = max(metrics.lag_seconds(now), metrics.batch_lag_seconds if fresh else 0.0)
        metrics.history.observe(now, lag, metrics.events)
        data = json.dumps(relay_status_document(metrics, self.started, now)).encode()
        try:
            write_status(self._zookeeper, self._parent, self.path, data)
        except (KazooException, PgshovelError) as error:
            if not self._warned:
                logger.warning("cannot write the relay's status to zookeeper (%s)", error)
                self._warned = True
            return
        self._warned = False

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            self._zookeeper.delete(self.path)
        except KazooException:
            pass
