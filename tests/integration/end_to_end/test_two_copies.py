"""Two copies of one set (PostgreSQL and Parquet workers): each reports on its own, truthfully.

Both workers stream the same set. With the PostgreSQL copy's apply held (its
table locked), that worker's apply lag follows the stopwatch from the commit
and ``set inspect`` shows it applying, its status fresh. ``set verify`` gets one report per copy,
each under its target's name; one copy tampered with makes the command exit 1
whichever worker answers last, and the report says which copy differs. With
no worker running, ``set verify`` and ``set resnapshot`` fail at once instead
of waiting for the timeout.
"""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import yaml
from kazoo.client import KazooClient

from pgshovel.admin.requests import running_copies
from pgshovel.replication.targets import copy_name
from pgshovel.replication.targets.parquet import ParquetTarget
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.sandbox import SandboxConnection
from tests.integration.capture._capture import SET
from tests.integration.relay.test_lag import free_port

from ._scenario import Processes, Scenario, captured_source
from ._stack import wait_until, write_replication_yml
from ._targets import make_target, source_rows
from .test_incremental import admin, finished

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

HELD_SECONDS = 3.0
SCHEMA = """
CREATE TABLE items (id integer PRIMARY KEY, v integer NOT NULL);
INSERT INTO items SELECT g, g FROM generate_series(1, 300) g;
"""


def scrape(port: int, name: str, target: str, **labels: str) -> float:
    """A worker series from its metrics port: the one labelled ``target`` (and ``labels``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    for line in body.splitlines():
        if not line.startswith(f"pgshovel_worker_{name}{{"):
            continue
        wanted = {"target": target, **labels}
        if all(f'{key}="{value}"' in line for key, value in wanted.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} series for {target} {labels} in:\n{body}")


def test_verify_answers_per_copy_and_fails_at_once_without_workers(
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
    relay = run.start_relay(lead=False)

    # With no worker running the commands fail at once, and ask nothing of anyone.
    started = time.monotonic()
    for words in (("verify", SET), ("resnapshot", SET, "items")):
        code, output = finished(admin(sandbox, cluster_name, *words), timeout=120)
        assert code == 1, output
        assert f"no worker of set {SET!r} is running" in output, output
    assert time.monotonic() - started < 60, "they fail at once, not after --timeout"

    port = free_port()
    copies = {
        kind: make_target(kind, make_database, tmp_path / kind, cluster_name)
        for kind in ("postgresql", "parquet")
    }
    workers = {}
    for kind, copy in copies.items():
        (tmp_path / kind).mkdir(exist_ok=True)
        configuration = write_replication_yml(
            tmp_path / kind / "replication.yml", kafka_config, run.topic, copy.spec
        )
        if kind == "postgresql":
            document = yaml.safe_load(configuration.read_text())
            document["metrics_port"] = port
            configuration.write_text(yaml.safe_dump(document))
        workers[kind] = run.start_worker(configuration, tmp_path / kind / "worker.log")
    names = {
        "postgresql": copy_name(PostgresTarget(copies["postgresql"].dsn)),
        "parquet": copy_name(ParquetTarget(str(copies["parquet"].path))),
    }
    for kind, worker in workers.items():
        run.streaming(worker, copies[kind].progress, f"the {kind} worker to stream", 240)
    wait_until(lambda: len(running_copies(zookeeper, cluster_name, SET)) == 2, "both statuses", 60)
    with psycopg2.connect(source) as connection, connection.cursor() as cursor:
        cursor.execute("UPDATE items SET v = v + 1 WHERE id <= 10")
    connection.close()
    for kind, copy in copies.items():
        run.wait_caught_up(workers[kind], lambda copy=copy: copy.progress()[0])  # type: ignore[misc]
        assert copy.rows("items") == source_rows(source, "items"), kind

    # The PostgreSQL copy's apply is held (its table locked in the copy): its lag is the time
    # since the commit by the stopwatch, set inspect shows it applying with a fresh status,
    # and once the lock goes the lag is 0 again.
    assert scrape(port, "apply_lag_seconds", names["postgresql"]) == 0.0, "idle"
    blocker = psycopg2.connect(copies["postgresql"].dsn)
    try:
        with blocker.cursor() as cursor:
            cursor.execute("LOCK TABLE public.items IN ACCESS EXCLUSIVE MODE")
        with psycopg2.connect(source) as connection, connection.cursor() as cursor:
            cursor.execute("UPDATE items SET v = v + 1 WHERE id = 200")
        connection.close()
        committed = time.time()
        wait_until(
            lambda: scrape(port, "apply_lag_seconds", names["postgresql"]) > 0,
            "the worker to read the change",
            60,
        )
        time.sleep(HELD_SECONDS)
        before = time.time() - committed
        lag = scrape(port, "apply_lag_seconds", names["postgresql"])
        after = time.time() - committed
        assert before - 1.0 <= lag <= after + 0.5, (before, lag, after)
        code, report = finished(admin(sandbox, cluster_name, "inspect", SET), timeout=120)
        assert code == 0, report
        line = re.search(re.escape(names["postgresql"]) + r", .* updated (\d+)s ago", report)
        assert line is not None and int(line.group(1)) <= 2, report
        applying = r"applying 1 mutation\(s\) of \d+ batch\(es\) from batch \d+, for"
        assert re.search(applying, report), report
    finally:
        blocker.rollback()
        blocker.close()
    run.wait_caught_up(workers["postgresql"], lambda: copies["postgresql"].progress()[0])
    assert scrape(port, "apply_lag_seconds", names["postgresql"]) == 0.0
    assert scrape(port, "batch_lag_seconds", names["postgresql"]) >= HELD_SECONDS
    assert scrape(port, "table_mutations_total", names["postgresql"], table="items") == 11.0

    # The PostgreSQL copy loses rows: its report says so, the Parquet copy's does not.
    with psycopg2.connect(copies["postgresql"].dsn) as connection, connection.cursor() as cursor:
        cursor.execute("DELETE FROM public.items WHERE id BETWEEN 100 AND 103")
    connection.close()
    code, output = finished(admin(sandbox, cluster_name, "verify", SET, "--timeout", "240"))
    assert code == 1, output
    blocks = dict(re.findall(r"^copy (\S+):\n((?:  .*\n?)*)", output, re.M))
    assert len(blocks) == 2, output
    assert set(blocks) == set(names.values()), output
    assert re.search(r"  status: done\n.*\n    no difference", blocks[names["parquet"]]), output
    # the 4 rows missing from the copy, counted in the buckets that differ
    holding = re.findall(
        r"bucket\(s\) differ, holding (\d+) row\(s\) in the source and (\d+) row\(s\) in the copy",
        blocks[names["postgresql"]],
    )
    assert sum(int(source) - int(copy) for source, copy in holding) == 4, output

    for worker in workers.values():
        assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
