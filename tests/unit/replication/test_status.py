"""The worker's status board: the node it writes, and the history of lag it keeps."""

from __future__ import annotations

import json

from pgshovel.replication.metrics import WorkerMetrics
from pgshovel.replication.status import StatusBoard
from tests.unit._nodes import Nodes


def test_a_catch_up_micro_batch_shows_its_lag_in_the_history() -> None:
    nodes = Nodes("/main/sets/orders")
    board = StatusBoard(lambda: nodes, "main", "orders", "PostgresTarget", interval=0.0)
    metrics = WorkerMetrics(streaming=True)
    board.publish(metrics)
    # The first micro-batch after the snapshot: its changes waited 31 s; committed now.
    metrics.mutations, metrics.batch_lag_seconds = 1600, 31.0
    board.publish(metrics)
    board.publish(metrics)  # idle afterwards: the same micro-batch is not counted again
    (path,) = [name for name in nodes.data if name.startswith("/main/sets/orders/workers/")]
    document = json.loads(nodes.data[path])
    assert document["lag_seconds"] == 0.0 and document["mutations"] == 1600
    assert [sample[1] for sample in document["history"]["samples"]] == [31.0]


def test_a_dropped_set_is_not_recreated() -> None:
    nodes = Nodes()
    board = StatusBoard(lambda: nodes, "main", "orders", "PostgresTarget")
    board.publish(WorkerMetrics(), force=True)
    assert nodes.data == {}
