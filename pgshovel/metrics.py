"""Serving Prometheus metrics: one registry per process, every series labelled cluster and set.

Relay and worker keep their figures in plain attributes their loops update
(no lock, no library call on the hot path); a collector turns them into metric
families when Prometheus scrapes. ``serve`` starts ``prometheus_client``'s HTTP
server on a port of the configuration; a port that is taken is a one-line
``ConfigurationError`` naming it.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from pgshovel.errors import ConfigurationError
from pgshovel.history import History, RecentErrors

logger = logging.getLogger(__name__)

#: the labels every pgshovel series carries
LABELS = ("cluster", "set")


@dataclass(frozen=True)
class Series:
    """One metric: name (without prefix), kind, help, and how to read its value(s).

    ``read`` returns a number, or for a labelled family a list of
    ``(extra label values, number)``.
    """

    name: str
    kind: str  # "counter" or "gauge"
    text: str
    read: Callable[[], float | list[tuple[tuple[str, ...], float]]]
    extra_labels: tuple[str, ...] = ()


@dataclass
class Delivery:
    """What relay and worker share: failures, and the age of the oldest undelivered change.

    ``pending_since`` is when that change happened (epoch seconds), None when
    everything is delivered; it is kept through failures and retries, so the
    lag grows while a process is stuck. ``delivered()`` clears it and keeps the
    age it had (``batch_lag_seconds``). ``history`` and ``recent_errors`` are the
    last hour and the last failures, for the status document (``pgshovel.history``).
    """

    errors: int = 0
    pending_since: float | None = None
    batch_lag_seconds: float = 0.0
    history: History = field(default_factory=History)
    recent_errors: RecentErrors = field(default_factory=RecentErrors)

    def lag_seconds(self, now: float | None = None) -> float:
        """Age of the oldest change not yet delivered (0 when nothing is pending)."""
        if self.pending_since is None:
            return 0.0
        return max(0.0, (time.time() if now is None else now) - self.pending_since)

    def failed(self, error: BaseException) -> None:
        """A step failed (retried or fatal): counted, and kept with its time."""
        self.errors += 1
        self.recent_errors.record(time.time(), str(error))

    def delivered(self) -> float:
        """The pending changes went out; returns (and keeps) their lag."""
        self.batch_lag_seconds = self.lag_seconds()
        self.pending_since = None
        return self.batch_lag_seconds

    def delivery_series(self, lag_name: str, lag_text: str, batch_lag_text: str) -> list[Series]:
        return [
            Series("errors_total", "counter", "Failures (each retried or fatal).", self._errors),
            Series(lag_name, "gauge", lag_text, self.lag_seconds),
            Series("batch_lag_seconds", "gauge", batch_lag_text, self._batch_lag),
        ]

    def _errors(self) -> float:
        return self.errors

    def _batch_lag(self) -> float:
        return self.batch_lag_seconds


class FigureCollector(Collector):
    """Yields ``series`` as metric families named ``<prefix>_<name>``."""

    def __init__(self, prefix: str, labels: tuple[str, str], series: Iterable[Series]) -> None:
        self.prefix = prefix
        self.labels = labels
        self.series = tuple(series)

    def collect(self) -> Iterator[Metric]:
        for item in self.series:
            name = f"{self.prefix}_{item.name}"
            label_names = [*LABELS, *item.extra_labels]
            family: CounterMetricFamily | GaugeMetricFamily
            if item.kind == "counter":
                family = CounterMetricFamily(name, item.text, labels=label_names)
            else:
                family = GaugeMetricFamily(name, item.text, labels=label_names)
            value = item.read()
            samples = value if isinstance(value, list) else [((), value)]
            for extra, number in samples:
                family.add_metric([*self.labels, *extra], float(number))
            yield family


class MetricsEndpoint:
    """``http://host:port/metrics`` for one registry; ``close()`` stops it."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        try:
            server, thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise ConfigurationError(
                    f"metrics port {port} on {host} is already in use; set metrics_port to a "
                    "free port (or null to serve no metrics)"
                ) from error
            raise ConfigurationError(
                f"cannot serve metrics on {host}:{port}: {error.strerror or error}; "
                "check metrics_host and metrics_port"
            ) from error
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread
        self.port = int(server.server_address[1])
        logger.info("metrics on http://%s:%d/metrics", host, self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve(
    prefix: str, labels: tuple[str, str], series: Iterable[Series], host: str, port: int
) -> MetricsEndpoint:
    """Serve ``series`` on ``host:port`` from a registry of their own."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FigureCollector(prefix, labels, series))
    return MetricsEndpoint(registry, host, port)


def exposition(prefix: str, labels: tuple[str, str], series: Iterable[Series]) -> str:
    """The text a scrape would return (for tests and ``--debug`` dumps)."""
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FigureCollector(prefix, labels, series))
    return generate_latest(registry).decode()
