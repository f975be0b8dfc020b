"""The relay's status document: what the console shows of one relay, its hour and its errors."""

from __future__ import annotations

import json

from pgshovel.errors import BrokerUnavailable
from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.status import RelayStatusBoard, relay_status_document
from tests.unit._nodes import Nodes


def test_the_document_holds_role_epoch_lag_counters_history_and_errors() -> None:
    metrics = RelayMetrics(leader=True, epoch=4, batches=3, events=90, bytes=4096)
    metrics.last_tick = 995.0
    metrics.pending_since = 990.0  # a batch taken, not yet acknowledged
    metrics.history.observe(980.0, 0.0, 0)
    metrics.history.observe(990.0, 0.0, 90)
    metrics.failed(BrokerUnavailable("kafka at 127.0.0.1:1 is unavailable"))
    document = relay_status_document(metrics, started=900.0, now=1000.0)
    assert document["role"] == "leader" and document["epoch"] == 4
    assert document["lag_seconds"] == 10.0
    assert document["last_tick_age_seconds"] == 5.0
    assert (document["batches"], document["events"], document["bytes"]) == (3, 90, 4096)
    assert document["history"]["samples"] == [[990.0, 0.0, 9.0]]
    assert document["errors"] == 1
    assert document["recent_errors"][0]["message"] == "kafka at 127.0.0.1:1 is unavailable"
    json.dumps(document)  # what the node holds


def test_a_standby_says_so_and_has_no_lag() -> None:
    document = relay_status_document(RelayMetrics(), started=900.0, now=1000.0)
    assert document["role"] == "standby" and document["lag_seconds"] == 0.0
    assert document["history"] == {"interval": 10.0, "samples": []}
    assert document["recent_errors"] == []


def test_the_board_keeps_a_catch_up_batch_lag_in_the_history() -> None:
    nodes = Nodes("/main/sets/orders")
    metrics = RelayMetrics(leader=True, epoch=1)
    board = RelayStatusBoard(nodes, "main", "orders", "h:1:a", metrics)
    board.publish()
    # A batch whose oldest change was 31 s old when Kafka acknowledged it; nothing pending now.
    metrics.events, metrics.batch_lag_seconds = 500, 31.0
    board.publish()
    board.publish()  # the same batch is not counted again
    document = json.loads(nodes.data["/main/sets/orders/relays/h:1:a"])
    assert document["lag_seconds"] == 0.0
    assert document["history"]["samples"][-1][1] == 31.0
    board.close()
    assert "/main/sets/orders/relays/h:1:a" not in nodes.data
