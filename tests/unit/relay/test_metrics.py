"""Metrics render in Prometheus text format."""

from __future__ import annotations

import urllib.request

from pgshovel.relay.metrics import MetricsServer, RelayMetrics


def test_render_and_serve() -> None:
    metrics = RelayMetrics(batches=3, events=42, lag_seconds=0.25)
    text = metrics.render()
    assert "pgshovel_relay_events_total 42" in text
    assert "# TYPE pgshovel_relay_batches_total counter" in text
    server = MetricsServer(metrics, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
        assert "pgshovel_relay_batches_total 3" in body
        assert "pgshovel_relay_lag_seconds 0.25" in body
    finally:
        server.close()
