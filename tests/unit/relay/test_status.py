"""The relay's status document: what the console shows of one relay, its hour and its errors."""

from __future__ import annotations

import json

from pgshovel.errors import BrokerUnavailable
from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.status import relay_status_document


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
