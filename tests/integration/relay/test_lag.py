"""Relay lag is the age of the oldest change not yet published, checked against a stopwatch.

A relay stopped for 20 s with changes queued reports a lag of at least 20 s
at its first batch; a transaction open across a tick and committed after it
(its events were written before the tick) leaves no lag once published, also
while the relay idles afterwards; with Kafka stopped, ``lag_seconds`` is the
time since the stuck change committed, scrape after scrape, and it is 0 again
once the queue is drained. The events and per-table mutations it counts are the rows
the source wrote. Every series carries the cluster and set labels.
"""

from __future__ import annotations

import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg2
import pytest

from pgshovel.sandbox import SandboxConnection, start_kafka, stop_kafka
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import RelayProcess, queue_drained, wait_for, write_relay_yml
from tests.integration.relay.test_kafka_outage import _kafka_running, insert_rows
from tests.integration.relay.test_relay import prepare

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STOPPED_SECONDS = 20
IDLE_SECONDS = 3.0
_BATCH = re.compile(r"batch \d+: (\d+) events, \d+ bytes, [\d.]+s, lag ([\d.]+)s")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int, name: str, cluster: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    labels = f'cluster="{cluster}",set="{SET}"'
    match = re.search(rf"^pgshovel_relay_{name}\{{{re.escape(labels)}\}} (\S+)$", body, re.M)
    assert match is not None, f"no {name} series labelled {labels} in:\n{body}"
    return float(match.group(1))


def scrape_table(port: int, cluster: str, table: str) -> float:
    """The relay's ``table_mutations_total`` of ``public.<table>``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    labels = f'cluster="{cluster}",schema="public",set="{SET}",table="{table}"'
    pattern = rf"^pgshovel_relay_table_mutations_total\{{{re.escape(labels)}\}} (\S+)$"
    match = re.search(pattern, body, re.M)
    assert match is not None, f"no table_mutations_total labelled {labels} in:\n{body}"
    return float(match.group(1))


def probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def sparse_transaction(dsn: str, key: int) -> None:
    """BEGIN; INSERT; pg_sleep(1); COMMIT: the relay ticks while it is open."""
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (%s, 1, 'sparse')", (key,))
            cursor.execute("SELECT pg_sleep(1)")
    finally:
        connection.close()


def test_lag_counts_from_the_oldest_unpublished_change(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    port = free_port()
    config = write_relay_yml(
        tmp_path, sandbox, metrics_port=port, flush_timeout=3.0, retry_interval=0.5
    )
    first = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay-1.log")
    try:
        insert_rows(database, 1, 100)
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay", first.output)
    finally:
        assert first.stop() == 0, first.output()
    insert_rows(database, 1_000, 500)
    time.sleep(STOPPED_SECONDS)
    second = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay-2.log")
    kafka_stopped = False
    try:
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay", second.output)
        batches = [(int(n), float(lag)) for n, lag in _BATCH.findall(second.output())]
        with_events = [lag for events, lag in batches if events > 0]
        assert with_events, second.output()
        assert with_events[0] >= STOPPED_SECONDS, f"first batch after the stop: {batches}"
        assert scrape(port, "lag_seconds", cluster_name) == 0.0, "drained: no lag"

        # A transaction open while the relay ticks, committed with no write after it.
        sparse_transaction(database, 4_000)
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay", second.output)
        time.sleep(IDLE_SECONDS)
        assert scrape(port, "lag_seconds", cluster_name) == 0.0, "idle after a sparse commit"

        stop_kafka(sandbox)
        kafka_stopped = True
        insert_rows(database, 5_000, 100)
        committed = time.time()
        outage = lambda: "retrying with backoff" in second.output()  # noqa: E731
        wait_for(outage, 45, "the outage", second.output)
        for _ in range(2):
            before = time.time() - committed
            lag = scrape(port, "lag_seconds", cluster_name)
            after = time.time() - committed
            # the age of the stuck commit, by the stopwatch (its transaction lasted a moment)
            assert before - 0.5 <= lag <= after + 1.0, (before, lag, after)
            time.sleep(3.0)
        later = lag
        assert scrape(port, "errors_total", cluster_name) >= 1
        assert scrape(port, "leader", cluster_name) == 1.0
        assert scrape(port, "backlog_events", cluster_name) == 100.0, "the stuck batch's events"
        status, why = probe(port, "/readyz")
        assert status == 503 and why.startswith("the last step failed"), (status, why)

        start_kafka(sandbox)
        kafka_stopped = False
        wait_for(lambda: queue_drained(database, cluster_name), 90, "recovery", second.output)
        assert scrape(port, "lag_seconds", cluster_name) == 0.0
        assert scrape(port, "batch_lag_seconds", cluster_name) >= later
        assert scrape(port, "backlog_events", cluster_name) == 0.0
        # What this relay published, counted as the source wrote it: 500 rows in one
        # statement, the sparse row, 100 rows in one statement (packed as COPY lines,
        # counted change by change), nothing twice for the batch retried after the outage.
        assert scrape(port, "events_total", cluster_name) == 601.0
        assert scrape_table(port, cluster_name, "items") == 601.0
        assert probe(port, "/readyz") == (200, "ready\n")
        assert probe(port, "/healthz") == (200, "ok\n")
    finally:
        if kafka_stopped and not _kafka_running(sandbox):
            start_kafka(sandbox)
        code = second.stop()
    assert code == 0, second.output()
