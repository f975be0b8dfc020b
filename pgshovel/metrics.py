"""Serving Prometheus metrics and health: one registry per process, every series labelled.

Relay and worker keep their figures in plain attributes their loops update
(no lock, no library call on the hot path); a collector turns them into metric
families when Prometheus scrapes. Every series carries the labels ``cluster``
and ``set``, and whatever constant labels the process adds (the worker: its
copy's ``target``). ``serve`` starts an HTTP server on a port of the
configuration with ``/metrics`` (Prometheus text), ``/healthz`` (200 while the
process runs) and ``/readyz`` (200 while it does its work and its last step
succeeded recently, else 503 with the reason); a port that is taken is a
one-line ``ConfigurationError`` naming it.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from pgshovel.errors import ConfigurationError
from pgshovel.history import History, RecentErrors

logger = logging.getLogger(__name__)

#: the labels every pgshovel series carries
LABELS = ("cluster", "set")
#: a process whose last successful step is older than this, and which is not busy with
#: one long step, is not ready
READY_SECONDS = 120.0
#: (ready, why): what ``/readyz`` answers
Readiness = tuple[bool, str]


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
    #: when the last step went through, and when the last one failed (epoch seconds)
    succeeded_at: float | None = None
    failed_at: float | None = None

    def succeeded(self) -> None:
        self.succeeded_at = time.time()

    def step_readiness(self, working: bool, busy: bool, now: float | None = None) -> Readiness:
        """Ready while ``working`` (leading, streaming) and the last step succeeded, recently
        (or one long step, ``busy``, is under way)."""
        now = time.time() if now is None else now
        if not working:
            return False, "not working"
        if self.succeeded_at is None:
            return False, "no step has succeeded yet"
        if self.failed_at is not None and self.failed_at > self.succeeded_at:
            return False, f"the last step failed {now - self.failed_at:.0f}s ago"
        if not busy and now - self.succeeded_at > READY_SECONDS:
            return False, f"no step succeeded for {now - self.succeeded_at:.0f}s"
        return True, "ready"

    def lag_seconds(self, now: float | None = None) -> float:
        """Age of the oldest change not yet delivered (0 when nothing is pending)."""
        if self.pending_since is None:
            return 0.0
        return max(0.0, (time.time() if now is None else now) - self.pending_since)

    def failed(self, error: BaseException) -> None:
        """A step failed (retried or fatal): counted, and kept with its time."""
        self.errors += 1
        self.failed_at = time.time()
        self.recent_errors.record(self.failed_at, str(error))

    def delivered(self) -> float:
        """The pending changes went out; returns (and keeps) their lag."""
        self.batch_lag_seconds = self.lag_seconds()
        self.pending_since = None
        return self.batch_lag_seconds

    def lag_gauge(self) -> float:
        """The lag as the endpoint serves it (``lag_seconds``, unless a process knows more)."""
        return self.lag_seconds()

    def delivery_series(self, lag_name: str, lag_text: str, batch_lag_text: str) -> list[Series]:
        return [
            Series("errors_total", "counter", "Failures (each retried or fatal).", self._errors),
            Series(lag_name, "gauge", lag_text, self.lag_gauge),
            Series("batch_lag_seconds", "gauge", batch_lag_text, self._batch_lag),
        ]

    def _errors(self) -> float:
        return self.errors

    def _batch_lag(self) -> float:
        return self.batch_lag_seconds


class FigureCollector(Collector):
    """Yields ``series`` as metric families named ``<prefix>_<name>``."""

    def __init__(
        self,
        prefix: str,
        labels: tuple[str, str],
        series: Iterable[Series],
        constant: Mapping[str, str] | None = None,
    ) -> None:
        self.prefix = prefix
        self.labels = (*labels, *(constant or {}).values())
        self.label_names = (*LABELS, *(constant or {}))
        self.series = tuple(series)

    def collect(self) -> Iterator[Metric]:
        for item in self.series:
            name = f"{self.prefix}_{item.name}"
            label_names = [*self.label_names, *item.extra_labels]
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


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds are not news


def _application(
    registry: CollectorRegistry, readiness: Callable[[], Readiness]
) -> Callable[[dict[str, Any], Callable[..., Any]], list[bytes]]:
    metrics = make_wsgi_app(registry)

    def answer(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
        body = (text + "\n").encode()
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [body]

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return answer(start_response, "200 OK", "ok")
        if path == "/readyz":
            ready, why = readiness()
            return answer(start_response, "200 OK" if ready else "503 Service Unavailable", why)
        return list(metrics(environ, start_response))

    return application


class MetricsEndpoint:
    """``/metrics``, ``/healthz`` and ``/readyz`` on ``http://host:port``; ``close()`` stops it."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        readiness: Callable[[], Readiness] = lambda: (True, "ready"),
    ) -> None:
        server_class = _Server6 if ":" in host else _Server
        try:
            server = make_server(
                host,
                port,
                _application(registry, readiness),
                server_class=server_class,
                handler_class=_QuietHandler,
            )
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
        thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
        thread.start()
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread
        self.port = int(server.server_address[1])
        logger.info("metrics on http://%s:%d/metrics (and /healthz, /readyz)", host, self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def registry_of(
    prefix: str,
    labels: tuple[str, str],
    series: Iterable[Series],
    constant: Mapping[str, str] | None = None,
) -> CollectorRegistry:
    """A registry of its own holding ``series``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FigureCollector(prefix, labels, series, constant))
    return registry


def serve(
    prefix: str,
    labels: tuple[str, str],
    series: Iterable[Series],
    host: str,
    port: int,
    *,
    constant: Mapping[str, str] | None = None,
    readiness: Callable[[], Readiness] = lambda: (True, "ready"),
) -> MetricsEndpoint:
    """Serve ``series`` (and health) on ``host:port`` from a registry of their own."""
    return MetricsEndpoint(registry_of(prefix, labels, series, constant), host, port, readiness)


def exposition(
    prefix: str,
    labels: tuple[str, str],
    series: Iterable[Series],
    constant: Mapping[str, str] | None = None,
) -> str:
    """The text a scrape would return (for tests and ``--debug`` dumps)."""
    from prometheus_client import generate_latest

    return generate_latest(registry_of(prefix, labels, series, constant)).decode()
