"""``make demo`` in short mode on the test sandbox: the replica converges, nothing is left running.

Runs ``python -m example.demo --short`` as a user would (a subprocess, the
example configurations as shipped) against the session's sandbox, in its own
cluster and databases, and checks the final table and the processes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
    done = subprocess.run(
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
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
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

    started = {name: int(pid) for name, pid in STARTED.findall(done.stdout)}
    assert set(started) == {"pgshovel-relay", "pgshovel-replicate"}, output
    for pid in started.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the demo stopped it
    # A sandbox the demo did not start is left running.
    assert all(service.running for service in status(Path(sandbox.state_dir)))
