"""The worker's status in ZooKeeper, for ``set inspect``: one ephemeral node per running worker.

``/<cluster>/sets/<set>/workers/<host:pid:id>`` holds a small JSON document
(target, phase, stream offset and position, lag, snapshot tasks, the applied horizon, when
it was written), rewritten at most every ``interval`` seconds. The node is ephemeral, so a
worker that died leaves no status behind; a dropped set is not recreated
(the parent is created only under an existing set node). ZooKeeper being
unavailable costs one warning, never the worker.
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
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from pgshovel.cluster import names
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
        "position": state.position.describe() if state is not None else "",
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

    def publish(self, metrics: WorkerMetrics, force: bool = False) -> None:
        now = time.monotonic()
        if now < self._next and not force:
            return
        self._next = now + self.interval
        data = json.dumps(status_document(metrics, self.target, time.time())).encode()
        try:
            self._write(self._zookeeper(), data)
        except (KazooException, PgshovelError) as error:
            if not self._warned:
                logger.warning("cannot write the worker's status to zookeeper (%s)", error)
                self._warned = True
            return
        self._warned = False

    def _write(self, client: KazooClient, data: bytes) -> None:
        try:
            client.set(self.path, data)
            return
        except NoNodeError:
            pass
        try:
            client.create(self._parent)
        except NodeExistsError:
            pass
        except NoNodeError:
            return  # the set was dropped: leave it dropped
        client.create(self.path, data, ephemeral=True)

    def close(self) -> None:
        try:
            self._zookeeper().delete(self.path)
        except (KazooException, PgshovelError):
            pass
