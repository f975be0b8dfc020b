"""Relay metrics, served in Prometheus text format on an optional port."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)


@dataclass
class RelayMetrics:
    """Counters and gauges; updated by the relay loop, read by the HTTP thread."""

    batches: int = 0
    events: int = 0
    bytes: int = 0
    errors: int = 0
    rollbacks: int = 0
    lag_seconds: float = 0.0
    last_tick: float = field(default_factory=time.time)
    epoch: int = 0
    leader: bool = False

    def render(self) -> str:
        now = time.time()
        lines = []
        for name, kind, value, text in (
            ("batches_total", "counter", self.batches, "Batches published and finished."),
            ("events_total", "counter", self.events, "Mutations published."),
            ("bytes_total", "counter", self.bytes, "Bytes published to Kafka."),
            ("errors_total", "counter", self.errors, "Batches that failed."),
            ("rollbacks_total", "counter", self.rollbacks, "Rollback messages published."),
            ("lag_seconds", "gauge", self.lag_seconds, "Age of the last batch's end tick."),
            ("last_tick_age_seconds", "gauge", now - self.last_tick, "Seconds since a tick."),
            ("epoch", "gauge", self.epoch, "Fencing epoch of this relay."),
            ("leader", "gauge", int(self.leader), "1 while this relay publishes."),
        ):
            lines.append(f"# HELP pgshovel_relay_{name} {text}")
            lines.append(f"# TYPE pgshovel_relay_{name} {kind}")
            lines.append(f"pgshovel_relay_{name} {value}")
        return "\n".join(lines) + "\n"


class MetricsServer:
    """A tiny HTTP server answering ``GET /metrics``; stopped with ``close()``."""

    def __init__(self, metrics: RelayMetrics, host: str, port: int) -> None:
        registry = metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/") not in ("", "/metrics"):
                    self.send_error(404)
                    return
                body = registry.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                logger.debug(format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.5}, name="metrics"
        )
        self._thread.daemon = True
        self._thread.start()
        logger.info("metrics on http://%s:%d/metrics", host, self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
