"""The worker's status in ZooKeeper, for ``set inspect``: one ephemeral node per running worker.

``/<cluster>/sets/<set>/workers/<host:pid:id>`` holds a small JSON document
(target, phase, stream offset, lag, snapshot tasks, the applied horizon, the
last hour's lag and mutations/s and the last errors, when it was written),
rewritten at most every ``interval`` seconds (see ``pgshovel.cluster.status``).
ZooKeeper being unavailable costs one warning, never the worker.
"""

from __future__ import annotations

import json
import logging
import os
import socket
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


def status_document(metrics: WorkerMetrics, target: str, now: float) -> dict[str, Any]:
    """What ``set inspect`` shows of one worker (pure)."""
    state = metrics.state
    return {
        "target": target,
        "phase": "streaming" if metrics.streaming else "snapshot",
        "offset": metrics.offset,
        "lag_seconds": round(metrics.lag_seconds(now), 3),
        "lag_messages": metrics.lag_messages,
        "batch_lag_seconds": round(metrics.batch_lag_seconds, 3),
        "mutations": metrics.mutations,
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
    """Writes this worker's status node; ``close()`` removes it."""

    def __init__(
        self,
        zookeeper: Callable[[], KazooClient],
        cluster: str,
        set_name: str,
        target: str,
        interval: float = INTERVAL_SECONDS,
    ) -> None:
        self._zookeeper = zookeeper
        self._parent = names.workers_path(cluster, set_name)
        self.path = f"{self._parent}/{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.target = target
        self.interval = interval
        self._next = 0.0
        self._warned = False
        self._mutations = 0

    def publish(self, metrics: WorkerMetrics, force: bool = False) -> None:
        wall = time.time()
        # A micro-batch with mutations committed since the last look: its lag (source commit
        # to target commit) counts too, or a catch-up would never show in the history.
        fresh = metrics.mutations != self._mutations
        self._mutations = metrics.mutations
        lag = max(metrics.lag_seconds(wall), metrics.batch_lag_seconds if fresh else 0.0)
        metrics.history.observe(wall, lag, metrics.mutations)
        now = time.monotonic()
        if now < self._next and not force:
            return
        self._next = now + self.interval
        data = json.dumps(status_document(metrics, self.target, wall)).encode()
        try:
            write_status(self._zookeeper(), self._parent, self.path, data)
        except (KazooException, PgshovelError) as error:
            if not self._warned:
                logger.warning("cannot write the worker's status to zookeeper (%s)", error)
                self._warned = True
            return
        self._warned = False

    def close(self) -> None:
        try:
            self._zookeeper().delete(self.path)
        except (KazooException, PgshovelError):
            pass
