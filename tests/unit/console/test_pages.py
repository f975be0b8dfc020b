"""The console's pages rendered from status documents as relay and worker write them."""

from __future__ import annotations

import re
from typing import Any

from pgshovel.console import pages
from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.status import relay_status_document
from pgshovel.replication.metrics import WorkerMetrics
from pgshovel.replication.status import status_document
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState

NOW = 1_700_000_000.0


def relay_document() -> dict[str, Any]:
    metrics = RelayMetrics(leader=True, epoch=3, batches=40, events=1200, last_tick=NOW - 0.2)
    for second in range(0, 600, 1):
        metrics.history.observe(NOW - 600 + second, 0.2, second * 20)
    metrics.failed(ConnectionError("broker <b>down</b>"))
    return {"name": "host:4321:ab12cd34", **relay_status_document(metrics, NOW - 700, NOW)}


def worker_document() -> dict[str, Any]:
    metrics = WorkerMetrics(mutations=1100, offset=1500, streaming=True)
    metrics.state = WorkerState(
        "streaming",
        "10:10:",
        StreamPosition.start((0,)),
        tasks=(SnapshotTask("t1", "public", "orders", "verify", rows=250, estimate=1000),),
    )
    for second in range(0, 600, 1):
        metrics.history.observe(NOW - 600 + second, 1.5, second * 18)
    return {"name": "host:5678:ef56ab78", **status_document(metrics, "PostgresTarget", NOW)}


def detail() -> dict[str, Any]:
    return {
        "now": NOW,
        "cluster": "main",
        "set": "orders",
        "version": "abc123",
        "database": "dbname=shop password=********",
        "tables": [{"name": "public.orders", "key_columns": [], "columns": []}],
        "relay": {
            "leader": "host:4321:ab12cd34",
            "standbys": ["other:99:ffff0000"],
            "epoch": 3,
            "last_leader": "host:4321:ab12cd34",
            "processes": [relay_document()],
        },
        "backlog": {"events": 7, "oldest_seconds": 0.4, "last_batch_seconds": 0.1},
        "copies": [worker_document()],
        "errors": [{"time": NOW - 30, "process": "relay host:4321:ab12cd34", "message": "<b>x"}],
    }


def test_the_set_page_shows_numbers_charts_progress_and_errors() -> None:
    html = pages.set_page(detail(), refresh=5)
    assert '<meta http-equiv="refresh" content="5">' in html
    assert "<script" not in html and "<link" not in html  # nothing to run, nothing fetched
    assert html.count("<svg") == 2 and html.count("<polyline") >= 4
    assert re.search(r'id="relay-rate">20.0 events/s<', html), html
    assert re.search(r'id="copy-rate">18.0 mutations/s<', html)
    assert re.search(r'id="backlog">7 events<', html)
    assert "other:99:ffff0000" in html  # the standby
    assert "verify" in html and "250 / ~1000" in html and "width: 25%" in html
    assert "&lt;b&gt;x" in html and "<b>x" not in html  # an error's text is escaped
    assert "password=********" in html


def test_a_set_without_processes_says_what_to_start() -> None:
    data = detail()
    data["relay"] = {
        "leader": None,
        "standbys": [],
        "epoch": None,
        "last_leader": None,
        "processes": [],
    }
    data["copies"], data["errors"] = [], []
    data["backlog"] = {"error": "database unreachable: timeout"}
    html = pages.set_page(data, refresh=5)
    assert "pgshovel-relay relay.yml orders" in html
    assert "pgshovel-replicate replication.yml orders" in html
    assert "database unreachable" not in html  # no relay section without a relay
    assert "no samples in this window yet" in html


def test_the_overview_lists_clusters_and_sets() -> None:
    overview = {
        "now": NOW,
        "clusters": [
            {
                "name": "main",
                "version": "0.3.0",
                "error": None,
                "sets": [
                    {
                        "name": "orders",
                        "version": "abc",
                        "tables": 2,
                        "database": "dbname=shop",
                        "relay": {"leader": "h:1:a", "standbys": 0, "epoch": 2, "lag_seconds": 0.5},
                        "copies": [
                            {
                                "name": "h:2:b",
                                "target": "PostgresTarget",
                                "phase": "streaming",
                                "lag_seconds": 1.25,
                            }
                        ],
                    }
                ],
            },
            {"name": "locked", "version": None, "error": "zookeeper refused", "sets": []},
        ],
    }
    html = pages.overview_page(overview, refresh=10)
    assert 'href="/clusters/main/sets/orders"' in html
    assert "PostgresTarget: streaming, lag 1.2 s" in html
    assert "zookeeper refused" in html


def test_numbers_are_shown_readably() -> None:
    assert pages.seconds(None) == "-" and pages.seconds(0.04) == "0.0 s"
    assert pages.seconds(75) == "75 s" and pages.seconds(600) == "10.0 min"
    assert pages.rate(0) == "0" and pages.rate(0.25) == "0.25" and pages.rate(4567.2) == "4567"
    assert pages.percent({"rows": 5, "estimate": 0}) == 0
    assert pages.percent({"rows": 2000, "estimate": 1000}) == 100
    assert pages.samples({"history": {"samples": [[1, 2, 3], ["x", 1, 2], [1]]}}) == [(1, 2, 3)]
