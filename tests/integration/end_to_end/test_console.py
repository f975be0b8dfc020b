"""The web console against a running set: relay and worker under a workload, seen in Chromium.

The relay and the worker write their status nodes (with an hour of lag and
throughput samples); ``pgshovel-admin serve`` reads them from ZooKeeper and
the queue's backlog from the source. While the workload runs, the set's JSON
and its page must show the leading relay, the streaming copy, non-zero
throughput and a lag chart, and headless Chromium takes a screenshot of the
page (its path is printed; the test checks the page's HTML, the picture is
for a person to look at).
"""

from __future__ import annotations

import signal
import struct
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import admin, ok
from tests.integration.capture._capture import SET

from ._console import ConsoleProcess, fetch, fetch_json, screenshot
from ._scenario import Processes, Scenario
from ._schema import BULK, MATRIX, ODD, PAIRS, create_types
from ._stack import wait_until, worker_state, write_replication_yml
from ._workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

TABLES = (ODD, PAIRS, MATRIX, BULK)


def moving(document: dict[str, Any]) -> bool:
    """Whether a status document's history holds two samples (a line), one of a non-zero rate."""
    samples = document.get("history", {}).get("samples", ())
    return len(samples) >= 2 and any(sample[2] > 0 for sample in samples)


def test_the_console_shows_a_running_set_with_throughput_and_a_lag_chart(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source, target = make_database("source"), make_database("target")
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    run.prepare(zookeeper, TABLES, rows=200, bulk_rows=500, seed=5)
    create_types(target)
    relay = run.start_relay()
    configuration = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        run.topic,
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target},
        },
    )
    console = ConsoleProcess(sandbox, tmp_path / "console.log", "--refresh", "2")
    try:
        workload = Workload(source, threads=2, seed=5, pause=0.02)
        workload.start()
        try:
            worker = run.start_worker(configuration)
            wait_until(
                lambda: (worker_state(target, cluster_name) or ("", None))[1] is not None,
                "the first applied micro-batch",
                timeout=300,  # Spark's start, the snapshot and a batch, on a loaded machine
                alive=worker.alive,
                log=worker.output,
            )
            base = console.url()
            api = f"{base}api/clusters/{cluster_name}/sets/{SET}"

            def running() -> bool:
                detail = fetch_json(api)
                leaders = [
                    item for item in detail["relay"]["processes"] if item["role"] == "leader"
                ]
                copies = [item for item in detail["copies"] if item.get("phase") == "streaming"]
                return bool(leaders and copies and moving(leaders[0]) and moving(copies[0]))

            wait_until(running, "the console to show the relay and the copy moving", 120)
            detail = fetch_json(api)
            status, headers, page = fetch(f"{base}clusters/{cluster_name}/sets/{SET}")
            picture = screenshot(
                f"{base}clusters/{cluster_name}/sets/{SET}", tmp_path / "console.png"
            )
        finally:
            workload.stop()
        print(f"console screenshot: {picture}")

        # The JSON: what the processes wrote, and the backlog read from the source.
        assert detail["relay"]["leader"] == detail["relay"]["processes"][0]["name"]
        assert detail["relay"]["epoch"] >= 1 and "events" in detail["backlog"], detail["backlog"]
        (copy,) = detail["copies"]
        assert copy["target"] == "PostgresTarget" and copy["offset"] >= 0
        assert [table["name"] for table in detail["tables"]] == [
            f"{table.schema}.{table.name}" for table in TABLES
        ]
        # The page: numbers, a lag chart with a line, nothing that runs or is fetched.
        assert status == 200 and "script-src" not in headers["content-security-policy"]
        assert "default-src 'none'" in headers["content-security-policy"]
        assert "<script" not in page and "<link" not in page
        assert '<meta http-equiv="refresh" content="2">' in page
        assert (
            'aria-label="Lag, last hour"' in page and 'aria-label="Throughput, last hour"' in page
        )
        lag_chart = page.split('aria-label="Lag, last hour"', 1)[1].split("</svg>", 1)[0]
        assert "<polyline" in lag_chart or "<circle" in lag_chart
        rates = page.split('id="relay-rate">', 1)[1].split(" ", 1)[0]
        assert float(rates) > 0, page
        assert copy["name"] in page and relay.alive()
        # The screenshot is a PNG of the window's size.
        header = picture.read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", header[16:24]) == (1400, 1500)

        # The overview lists the cluster and its set; an unknown set is a 404 with one line; a
        # request addressed to another name is refused (a page elsewhere cannot read it).
        overview = fetch_json(f"{base}api/clusters")
        (mine,) = [item for item in overview["clusters"] if item["name"] == cluster_name]
        assert [item["name"] for item in mine["sets"]] == [SET]
        status, _, body = fetch(f"{base}api/clusters/{cluster_name}/sets/nothing")
        assert status == 404 and "set 'nothing' does not exist" in body
        status, _, _ = fetch(f"{base}clusters/{cluster_name}", host="attacker.example")
        assert status == 400

        console.signal(signal.SIGTERM)
        assert console.stop(60) == 0, console.output()
        assert worker.stop() == 0, worker.output()[-3000:]
        assert relay.stop() == 0, relay.output()[-3000:]
        # Stopped processes leave no status behind, and the set drops with its status nodes.
        assert not zookeeper.get_children(names.relays_path(cluster_name, SET))
        assert not zookeeper.get_children(names.workers_path(cluster_name, SET))
        ok(admin(sandbox, cluster_name, "set", "drop", SET))
        assert zookeeper.exists(names.set_path(cluster_name, SET)) is None
    finally:
        console.ensure_stopped()
