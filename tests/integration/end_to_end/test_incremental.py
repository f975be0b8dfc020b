"""Incremental snapshots while streaming: backfill, re-snapshot, verify and repair, under writes.

A 30,000-row table joins a running set (``set update``) and is copied chunk by
chunk between watermarks while threads keep writing to it and to the set's
other table, whose apply lag is probed meanwhile; the worker is killed -9 in
the middle of the backfill and in the middle of a verify. ``set resnapshot``
(with and without ``--where``) converges; rows changed and deleted directly in
the copy are found by ``set verify`` (exit 1, naming table and ranges) and
fixed by ``--repair`` (exit 0), a clean copy verifies with exit 0; at the end
every table equals the source row for row.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg2
import pyarrow.parquet as pq
import pytest
from kazoo.client import KazooClient

from pgshovel.admin import planning, twophase
from pgshovel.admin.requests import running_copies
from pgshovel.cluster.sets import parse_set_document
from pgshovel.replication.targets.parquet import current_path
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import context
from tests.integration.capture._capture import SET

from ._scenario import Processes, Scenario, captured_source
from ._stack import wait_until
from ._targets import TargetUnderTest, make_target, source_rows
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

ADMIN = Path(sys.executable).with_name("pgshovel-admin")
BIG_ROWS = 30_000

SCHEMA = f"""
CREATE TABLE items (id integer PRIMARY KEY, v integer NOT NULL, at timestamptz);
CREATE TABLE big (id integer PRIMARY KEY, payload text NOT NULL, n integer);
INSERT INTO items SELECT g, g, now() FROM generate_series(1, 2000) g;
INSERT INTO big SELECT g, repeat('p', 40) || g, g % 97 FROM generate_series(1, {BIG_ROWS}) g;
ANALYZE big;
"""


class Writer(WriterThreads):
    """Threads updating and inserting rows of ``items`` and ``big`` until stopped."""

    pause = 0.003

    def write(self, cursor: Any, rng: random.Random) -> None:
        key = rng.randrange(1, BIG_ROWS + 2000)
        choice = rng.random()
        if choice < 0.5:
            cursor.execute("UPDATE big SET n = n + 1 WHERE id = %s", (key,))
        elif choice < 0.6:
            cursor.execute("DELETE FROM big WHERE id = %s", (key,))
        elif choice < 0.7:
            cursor.execute(
                "INSERT INTO big VALUES (%s, 'new', 0) ON CONFLICT (id) DO NOTHING", (key,)
            )
        else:
            # Every item but the first: the lag probe owns item 1 (a write of its own
            # would move the value the probe waits for past it).
            cursor.execute(
                "UPDATE items SET v = v + 1, at = clock_timestamp() WHERE id = %s",
                (rng.randrange(2, 2001),),
            )


def admin(sandbox: SandboxConnection, cluster: str, *words: str) -> subprocess.Popen[str]:
    environment = {
        **os.environ,
        "PGSHOVEL_CLUSTER": cluster,
        "PGSHOVEL_ZOOKEEPER_HOSTS": sandbox.zookeeper_hosts,
    }
    return subprocess.Popen(
        [str(ADMIN), "set", *words],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def add_big(zookeeper: KazooClient, cluster: str, source: str) -> None:
    document = {"database": {"dsn": source}, "tables": [{"name": "items"}, {"name": "big"}]}
    with context(zookeeper, cluster) as ctx:
        plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
        twophase.execute(plan, ctx.connections, zookeeper)


PROBE_SECONDS = 150
#: what the worker logs when a verify of ``big`` starts ("...: ~29991 rows in 7 range(s)")
VERIFY_STARTS = "verify of public.big: ~"


def lag_probe(source: str, visible: Callable[[int], bool], key: int) -> float:
    """Seconds from a committed update of ``items`` to its visibility in the copy."""
    connection = psycopg2.connect(source)
    with connection, connection.cursor() as cursor:
        cursor.execute("UPDATE items SET v = %s WHERE id = 1", (key,))
    connection.close()
    started = time.monotonic()
    while not visible(key):
        # generous: the first probe after a kill -9 includes the new worker's Spark start
        if time.monotonic() - started > PROBE_SECONDS:
            raise AssertionError(
                f"an update of items did not reach the copy within {PROBE_SECONDS} s"
            )
        time.sleep(0.05)
    return time.monotonic() - started


def tamper_postgres(target: str) -> None:
    connection = psycopg2.connect(target)
    with connection, connection.cursor() as cursor:
        cursor.execute("UPDATE big SET payload = 'tampered' WHERE id IN (100, 20000, 41000)")
        cursor.execute("DELETE FROM big WHERE id IN (7, 33333)")
        cursor.execute("INSERT INTO big VALUES (999999, 'only in the copy', 1)")
    connection.close()


def output_path(copy: TargetUnderTest) -> Path:
    assert copy.path is not None
    return copy.path


def tamper_parquet(output: Path) -> None:
    directory = Path(current_path(str(output), "public", "big"))
    files = sorted(directory.glob("*.parquet"))
    table = pq.read_table(files[0])
    ids = table.column("id").to_pylist()
    keep = [i not in (7, 33333) for i in ids]
    payload = [
        "tampered" if i in (100, 20000) else p
        for i, p in zip(ids, table.column("payload").to_pylist(), strict=True)
    ]
    table = table.set_column(table.schema.get_field_index("payload"), "payload", [payload])
    pq.write_table(table.filter(keep), files[0])


@pytest.mark.parametrize("target_kind", ["postgresql", "parquet"])
def test_backfill_resnapshot_verify_and_repair_while_streaming(
    target_kind: str,
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = captured_source(make_database, zookeeper, cluster_name, SCHEMA, ["items"])
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    copy = make_target(target_kind, make_database, tmp_path, cluster_name)
    progress, copy_rows = copy.progress, copy.rows

    def item_value(key: int) -> bool:
        return any(row[0] == "1" and row[1] == str(key) for row in copy_rows("items"))

    configuration = run.replication_yml(copy.spec)
    text = configuration.read_text() + "snapshots: {rows_per_chunk: 5000, parallel: 2}\n"
    configuration.write_text(text)
    relay, worker = run.start_streaming(configuration, progress)
    writer = Writer(source)
    writer.start()
    lags: list[float] = []
    try:
        # Backfill: the table joins the running set; kill -9 the worker half way.
        started = time.monotonic()
        add_big(zookeeper, cluster_name, source)
        wait_until(
            lambda: "backfill of public.big: range 2/" in worker.output(),
            "two backfilled ranges",
            180,
            worker.alive,
            worker.output,
        )
        lags.append(lag_probe(source, item_value, 10_000_001))
        worker.kill()
        worker = run.start_worker(configuration)
        probe = 10_000_002
        while progress()[1] or "backfill of public.big finished" not in worker.output():
            lags.append(lag_probe(source, item_value, probe))
            probe += 1
            assert time.monotonic() - started < 300, "the backfill did not finish in 300 s"
        backfill_seconds = time.monotonic() - started

        # Re-snapshot on demand, whole and filtered.
        code, output_text = finished(admin(sandbox, cluster_name, "resnapshot", SET, "big"))
        assert code == 0, output_text
        assert "public.big: resnapshot" in output_text
        if target_kind == "postgresql":
            code, output_text = finished(
                admin(
                    sandbox, cluster_name, "resnapshot", SET, "public.big", "--where", "id % 7 = 0"
                )
            )
            assert code == 0, output_text

        # A clean copy verifies; a tampered one does not, until repaired.
        writer.paused.set()
        time.sleep(0.5)
        run.wait_caught_up(worker, lambda: progress()[0])
        for table in ("items", "big"):
            assert copy_rows(table) == source_rows(source, table), f"{table} after the copies"
        writer.paused.clear()
        code, output_text = finished(admin(sandbox, cluster_name, "verify", SET))
        assert code == 0, output_text
        assert "no difference" in output_text
        if target_kind == "postgresql":
            tamper_postgres(copy.dsn)
        else:
            worker.stop()
            tamper_parquet(output_path(copy))
            worker = run.start_worker(configuration)
            # verify asks the copies whose workers run: wait for the new one's status
            wait_until(
                lambda: running_copies(zookeeper, cluster_name, SET) != (),
                "the worker's status",
                180,
                worker.alive,
                worker.output,
            )
        # The log already holds the clean verify's start (one log for every worker of the
        # run): the kill waits for this verify's own.
        verifies = worker.output().count(VERIFY_STARTS)
        verify = admin(sandbox, cluster_name, "verify", SET, "big")
        wait_until(
            lambda: worker.output().count(VERIFY_STARTS) > verifies,
            "the verify to start",
            120,
            worker.alive,
            worker.output,
        )
        worker.kill()  # in the middle of the verify: the request survives
        worker = run.start_worker(configuration)
        code, output_text = finished(verify)
        assert code == 1, output_text
        assert "public.big: verify" in output_text
        assert re.search(
            r"range \d+ \[.*\): \d+ bucket\(s\) differ, holding \d+ row\(s\) in the source "
            r"and \d+ row\(s\) in the copy",
            output_text,
        ), output_text
        code, output_text = finished(admin(sandbox, cluster_name, "verify", SET, "big", "--repair"))
        assert code == 0, output_text
        code, output_text = finished(admin(sandbox, cluster_name, "verify", SET))
        assert code == 0, output_text
    finally:
        writer.stop()
    assert writer.committed > 200
    wait_until(lambda: progress()[1] == 0, "no task left", 300, worker.alive, worker.output)
    run.wait_caught_up(worker, lambda: progress()[0])
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    for table in ("items", "big"):
        assert copy_rows(table) == source_rows(source, table), table
    rates = [
        float(r)
        for r in re.findall(
            r"backfill of public\.big: .*?\((\d+) rows/s", (tmp_path / "worker.log").read_text()
        )
    ]
    report = {
        "target": target_kind,
        "backfill_seconds": round(backfill_seconds, 1),
        "backfill_rows_per_second": rates[-3:],
        "items_apply_lag_seconds": {
            "max": round(max(lags), 3),
            "median": round(sorted(lags)[len(lags) // 2], 3),
            "samples": len(lags),
        },
    }
    print("incremental snapshot report:", json.dumps(report))
    (tmp_path / "report.json").write_text(json.dumps(report))
