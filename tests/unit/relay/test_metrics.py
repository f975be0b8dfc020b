"""Relay metrics: labelled Prometheus series, and a lag that grows while a batch is stuck."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request

import pytest

from pgshovel.errors import ConfigurationError
from pgshovel.metrics import exposition, serve
from pgshovel.relay.metrics import RelayMetrics

LABELS = 'cluster="main",set="orders"'


def test_series_carry_cluster_and_set() -> None:
    metrics = RelayMetrics(batches=3, events=42, epoch=7, leader=True)
    text = exposition("pgshovel_relay", ("main", "orders"), metrics.series())
    assert f"pgshovel_relay_events_total{{{LABELS}}} 42.0" in text
    assert f"pgshovel_relay_epoch{{{LABELS}}} 7.0" in text
    assert f"pgshovel_relay_leader{{{LABELS}}} 1.0" in text
    assert "# TYPE pgshovel_relay_batches_total counter" in text
    assert f"pgshovel_relay_lag_seconds{{{LABELS}}} 0.0" in text


def test_lag_is_the_age_of_the_oldest_unpublished_change() -> None:
    metrics = RelayMetrics()
    assert metrics.lag_seconds(now=1000.0) == 0.0
    # a batch from a tick 20 s old: until its events are read, the tick bounds the age
    metrics.taken(start_tick_seconds=980.0)
    assert metrics.lag_seconds(now=1000.0) == 20.0
    # the oldest event is younger than the tick: the event's time counts
    metrics.refine(oldest_event_seconds=990.0, start_tick_seconds=980.0)
    assert metrics.lag_seconds(now=1000.0) == 10.0
    # a long transaction's event time is older than the tick: the tick counts
    metrics.refine(oldest_event_seconds=900.0, start_tick_seconds=980.0)
    assert metrics.lag_seconds(now=1000.0) == 20.0
    # stuck (Kafka down): the same batch is taken again; the lag keeps growing
    metrics.taken(start_tick_seconds=999.0)
    assert metrics.lag_seconds(now=1030.0) == 50.0
    lag = metrics.published()
    assert lag > 0 and metrics.batch_lag_seconds == lag
    assert metrics.lag_seconds() == 0.0


def test_served_over_http() -> None:
    metrics = RelayMetrics(batches=3)
    endpoint = serve("pgshovel_relay", ("main", "orders"), metrics.series(), "127.0.0.1", 0)
    try:
        metrics.batches = 5
        url = f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
        assert f"pgshovel_relay_batches_total{{{LABELS}}} 5.0" in body
    finally:
        endpoint.close()


def test_a_taken_port_is_a_one_line_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            ConfigurationError, match=f"metrics port {port} on 127.0.0.1 is already"
        ):
            serve("pgshovel_relay", ("main", "orders"), RelayMetrics().series(), "127.0.0.1", port)


def test_health_and_readiness_on_the_metrics_port() -> None:
    metrics = RelayMetrics()
    endpoint = serve(
        "pgshovel_relay",
        ("main", "orders"),
        metrics.series(),
        "127.0.0.1",
        0,
        readiness=metrics.readiness,
    )

    def get(path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{endpoint.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    try:
        assert get("/healthz") == (200, "ok\n")
        assert get("/readyz") == (503, "not leading (standing by)\n")
        metrics.leader = True
        assert get("/readyz") == (503, "no step has succeeded yet\n")
        metrics.succeeded()
        assert get("/readyz") == (200, "ready\n")
        metrics.failed(RuntimeError("kafka down"))
        status, text = get("/readyz")
        assert status == 503 and text.startswith("the last step failed"), text
        assert metrics.errors == 1
        assert get("/metrics")[0] == 200
    finally:
        endpoint.close()


def test_readiness_goes_stale_unless_a_long_step_is_under_way() -> None:
    metrics = RelayMetrics(leader=True, succeeded_at=1000.0)
    assert metrics.step_readiness(True, False, now=1100.0) == (True, "ready")
    assert metrics.step_readiness(True, False, now=1200.0) == (
        False,
        "no step succeeded for 200s",
    )
    assert metrics.step_readiness(True, True, now=1200.0) == (True, "ready")


def test_backlog_and_per_table_series() -> None:
    metrics = RelayMetrics()
    text = exposition("pgshovel_relay", ("main", "orders"), metrics.series())
    assert f"pgshovel_relay_backlog_events{{{LABELS}}} NaN" in text  # not served: unknown
    metrics.backlog = lambda: 42.0
    metrics.tables.update({("public", "orders"): 3, ("Odd Schema", "t"): 1})
    text = exposition("pgshovel_relay", ("main", "orders"), metrics.series())
    assert f"pgshovel_relay_backlog_events{{{LABELS}}} 42.0" in text
    assert (
        'pgshovel_relay_table_mutations_total{cluster="main",schema="public",set="orders",'
        'table="orders"} 3.0'
    ) in text


def test_the_lag_served_is_at_least_the_oldest_waiting_events_age() -> None:
    metrics = RelayMetrics()
    assert metrics.lag_gauge() == 0.0  # nothing pending, no backlog served
    metrics.backlog_age = lambda: 12.5  # a batch not taken yet holds a 12.5 s old event
    assert metrics.lag_gauge() == 12.5
    metrics.pending_since = time.time() - 30.0  # the batch taken is older still
    assert 30.0 <= metrics.lag_gauge() < 31.0
    metrics.pending_since = None
    metrics.backlog_age = lambda: None  # drained
    assert metrics.lag_gauge() == 0.0
