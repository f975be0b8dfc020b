"""``make demo`` in short mode on the test sandbox: the replica converges, nothing is left running.

Runs ``python -m example.demo --short`` as a user would (a subprocess, the
example configurations as shipped) against the session's sandbox, in its own
cluster and databases, reading its output as it comes: the console URL it
prints answers while the demo runs, live apply lines (with mutations applied
per second) come before the workload ends, and at the end the final table
and the processes are checked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest
from psycopg2 import sql

from pgshovel.sandbox import SandboxConnection, status
from tests.fix_sandbox import unique_name

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("products", "customers", "orders", "order_lines", "Shipping Notes")
#: a warning from librdkafka (through Python logging or its own stderr lines), Spark (log4j)
#: or its JVM
KAFKA_OR_SPARK_WARNING = re.compile(
    r"CONFWARN|^%[0-4]\|\d|\bWARN\b|log4j|jdk\.incubator|WARNING\b.*(kafka|spark|py4j)", re.I
)
#: Spark's log4j lines (its default layout, and pgshovel's quiet one's below-error levels)
SPARK_LOG4J = re.compile(
    r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO)|log4j profile|Setting default log level"
)
STARTED = re.compile(r"started (pgshovel-relay|pgshovel-replicate) \(pid (\d+)\)")
CONSOLE = re.compile(r"==> console: (http://\S+) \(pgshovel-admin serve, pid (\d+);")
LIVE = re.compile(r"copy applies (\d+) mutations/s \((\d+) in all\), lag [\d.]+ s \| rows: ")


@pytest.fixture
def database_prefix(sandbox: SandboxConnection) -> Iterator[str]:
    """A prefix for the demo's two databases; both are dropped after the test."""
    prefix = unique_name("demo", separator="_", limit=40)
    yield prefix
    connection = psycopg2.connect(sandbox.postgres_dsn)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            for suffix in ("source", "target"):
                name = sql.Identifier(f"{prefix}_{suffix}")
                cursor.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
    finally:
        connection.close()


def test_short_demo_converges_and_stops_its_processes(
    sandbox: SandboxConnection, cluster_name: str, database_prefix: str
) -> None:
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "example.demo",
            "--short",
            "--sandbox-dir",
            sandbox.state_dir,
            "--cluster",
            cluster_name,
            "--database-prefix",
            database_prefix,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one pipe, read as it comes: nothing can fill up
        text=True,
    )
    lines: list[str] = []
    announced = threading.Event()

    def read() -> None:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line)
            if CONSOLE.search(line):
                announced.set()

    reader = threading.Thread(target=read, name="demo output")
    reader.start()
    try:
        # The console answers while the demo runs, with the set's page and its JSON.
        assert announced.wait(300), "".join(lines)
        (console,) = [found for line in lines if (found := CONSOLE.search(line))]
        page_url, console_pid = console.group(1), int(console.group(2))
        with urllib.request.urlopen(page_url, timeout=60) as response:  # noqa: S310
            assert response.status == 200
            page = response.read().decode()
        assert "set demo" in page and "Lag, last hour" in page
        api_url = page_url.replace("/clusters/", "/api/clusters/", 1)
        with urllib.request.urlopen(api_url, timeout=60) as response:  # noqa: S310
            assert json.loads(response.read())["set"] == "demo"
        demo.wait(timeout=480)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        reader.join(60)
        assert demo.stdout is not None
        demo.stdout.close()
    done = subprocess.CompletedProcess(demo.args, demo.returncode, "".join(lines), "")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    rows = {
        line.split("  ")[0].strip(): line
        for line in done.stdout.splitlines()
        if line.rstrip().endswith(("MATCH", "DIFF"))
    }
    assert set(rows) == set(TABLES), output
    for table, line in rows.items():
        assert line.rstrip().endswith("MATCH"), f"{table}: {line}"
        counts = re.findall(r"\s(\d+)\s", line)
        assert counts[0] == counts[1] and int(counts[0]) > 0, line
    assert "the replica converged" in done.stdout
    # Quiet by default: librdkafka's broker-compatibility warnings once per process at most,
    # Spark's startup lines and warnings not at all.
    noise = [line for line in output.splitlines() if KAFKA_OR_SPARK_WARNING.search(line)]
    assert len(noise) <= 1, "\n".join(noise)
    # The processes' own logs (the demo shows them as they go): one broker-compatibility
    # line per process, no Spark logging but errors, and Spark's start and readiness.
    logs = Path(sandbox.state_dir) / "demo"
    for name in ("relay", "worker"):
        text = (logs / f"{name}.log").read_text()
        kafka = [line for line in text.splitlines() if "librdkafka" in line or "CONFWARN" in line]
        assert len(kafka) <= 1, "\n".join(kafka)
    worker_log = (logs / "worker.log").read_text()
    spark = [line for line in worker_log.splitlines() if SPARK_LOG4J.search(line)]
    assert not spark, "\n".join(spark[:10])
    assert "starting Spark" in worker_log and "Spark ready in" in worker_log
    # batches of idle ticks are no news (DEBUG)
    idle = re.findall(r".* INFO .*batch \d+: 0 events.*", (logs / "relay.log").read_text())
    assert not idle, "\n".join(idle[:5])
    assert "workload done:" in done.stdout and "relayed" in done.stdout
    # Progress while the worker starts, then live lines while the workload still runs.
    before_end = done.stdout.split("workload done:", 1)[0]
    starting = before_end.split("copy applies", 1)[0]
    assert "worker starting Spark" in starting or "loading the snapshot" in starting, output
    live = [(int(rate), int(total)) for rate, total in LIVE.findall(before_end)]
    assert len(live) >= 3 and any(rate > 0 for rate, _ in live), output
    assert live[-1][1] > live[0][1], output  # the copy kept applying

    started = {name: int(pid) for name, pid in STARTED.findall(done.stdout)}
    assert set(started) == {"pgshovel-relay", "pgshovel-replicate"}, output
    for pid in [*started.values(), console_pid]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the demo stopped it
    # A sandbox the demo did not start is left running.
    assert all(service.running for service in status(Path(sandbox.state_dir)))
