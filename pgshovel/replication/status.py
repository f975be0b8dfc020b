"""The worker's status in ZooKeeper, for ``set inspect``: one ephemeral node per running worker.

``/<cluster>/sets/<set>/workers/<host:pid:id>`` holds a small JSON document
(target, the copy's name, phase, stream offset and position, lag, what is
being applied and since when, snapshot tasks, the applied horizon, the last
hour's lag and mutations/s and the last errors, when it was written),
rewritten every ``interval`` seconds by a thread of its own, so it stays fresh
while the worker applies a long batch (and at once by the worker after each step; see
``pgshovel.cluster.status``). ZooKeeper being unavailable costs one warning,
never the worker.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from pgshovel.cluster import names
from pgshovel.cluster.status import write_status
from pgshovel.errors import PgshovelError
from pgshovel.replication.metrics import WorkerMetrics

logger = logging.getLogger(__name__)

INTERVAL_SECONDS = 1.0


def status_document(
    metrics: WorkerMetrics, target: str, now: float, copy: str = ""
) -> dict[str, Any]:
    """What ``set inspect`` shows of one worker (pure): ``target`` is the target's class,
    ``copy`` the copy's name (``postgresql:host:port/db``; ``set verify`` answers under it)."""
    state = metrics.state
    return {
        "target": target,
        "copy": copy or target,
        "phase": "streaming" if metrics.streaming else "snapshot",
        "offset": metrics.offset,
        "position": state.position.describe() if state is not None else "",
        "lag_seconds": round(metrics.lag_seconds(now), 3),
        "lag_messages": metrics.lag_messages,
        "batch_lag_seconds": round(metrics.batch_lag_seconds, 3),
        "mutations": metrics.mutations,
        # what the worker is applying now (read, not yet committed), null between micro-batches
        "applying": (
            None
            if metrics.applying is None
            else {
                "batch": metrics.applying.batch_id,
                "batches": metrics.applying.batches,
                "mutations": metrics.applying.mutations,
                "since": metrics.applying.since,
            }
        ),
        # read-your-writes (``pgshovel-admin set wait``): what this copy holds
        "horizon": state.applied_horizon if state is not None and metrics.streaming else "",
        "tasks": [
            {
                "table": f"{task.schema}.{task.table}",
                "purpose": task.purpose,
                "rows": task.rows,
                "estimate": task.estimate,
            }
            for task in (state.tasks if state is not None else ())
        ],
        "updated": now,
        # the console's charts and error list (pgshovel.history)
        "history": metrics.history.document(),
        "errors": metrics.errors,
        "recent_errors": metrics.recent_errors.document(),
    }


class StatusBoard:
    """Writes this worker's status node; ``keep_fresh`` rewrites it from a thread; ``close()``
    stops that thread and removes the node."""

    def __init__(
        self,
        zookeeper: Callable[[], KazooClient],
        cluster: str,
        set_name: str,
        target: str,
        interval: float = INTERVAL_SECONDS,
        copy: str = "",
    ) -> None:
        self._zookeeper = zookeeper
        self._parent = names.workers_path(cluster, set_name)
        self.path = f"{self._parent}/{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.target = target
        self.copy = copy or target
        self.interval = interval
        self._next = 0.0
        self._warned = False
        self._mutations = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def keep_fresh(self, metrics: WorkerMetrics) -> None:
        """Rewrite the status every ``interval`` seconds until ``close()``, whatever the
        worker is doing (a long apply, a snapshot load)."""
        if self._thread is not None:
            return

        def run() -> None:
            while not self._stop.wait(self.interval):
                self.publish(metrics, force=True)

        self._thread = threading.Thread(target=run, name="worker status", daemon=True)
        self._thread.start()

    def publish(self, metrics: WorkerMetrics, force: bool = False) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            wall = time.time()
            # A micro-batch with mutations committed since the last look: its lag (source
            # commit to target commit) counts too, or a catch-up would never show in the
            # history.
            fresh = metrics.mutations != self._mutations
            self._mutations = metrics.mutations
            lag = max(metrics.lag_seconds(wall), metrics.batch_lag_seconds if fresh else 0.0)
            metrics.history.observe(wall, lag, metrics.mutations)
            now = time.monotonic()
            if now < self._next and not force:
                return
            self._next = now + self.interval
            document = status_document(metrics, self.target, wall, self.copy)
            data = json.dumps(document).encode()
            try:
                write_status(self._zookeeper(), self._parent, self.path, data)
            except (KazooException, PgshovelError) as error:
                if not self._warned:
                    logger.warning("cannot write the worker's status to zookeeper (%s)", error)
                    self._warned = True
                return
            self._warned = False

    def close(self) -> None:
        with self._lock:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 10)
        try:
            self._zookeeper().delete(self.path)
        except (KazooException, PgshovelError):
            pass
