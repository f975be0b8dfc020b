"""Smoke test of ``python -m bench``: every figure of the stack groups is reported.

Runs the relay, latency, apply, verify, memory and table_formats groups in
``smoke`` mode (one round of tiny sizes: the numbers mean nothing, the code
paths are the quick and full modes' own) against the test sandbox
(``--use-sandbox``, so no second sandbox starts); the capture and snapshot
groups only add pgbench and a SparkSession, which other tests cover (the
capture group's consumers and durable switch: ``test_bench_capture.py``).
Every figure must be reported, measured or with the reason it was not; the
figures these groups can always measure must be measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench._modes import settings
from pgshovel.sandbox import SandboxConnection

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GROUPS = ("relay", "latency", "apply", "verify", "memory", "table_formats")
#: measured in every run, with a baseline of as many runs
COMPARED = (
    "relay.throughput",
    "apply.rows",
    "verify.rows",
    "memory.worker",
    "memory.relay",
    *(
        f"table_formats.{kind}.{what}"
        for kind in ("delta", "iceberg", "parquet")
        for what in ("time", "rss")
    ),
    "table_formats.delta.throughput",
    "table_formats.iceberg.throughput",
)


def test_smoke_bench_reports_every_figure_and_prints_the_table(
    sandbox: SandboxConnection, tmp_path: Path
) -> None:
    output = tmp_path / "latest.json"
    only = [argument for group in GROUPS for argument in ("--only", group)]
    command = [sys.executable, "-m", "bench", "--mode", "smoke", "--use-sandbox"]
    result = subprocess.run(
        [*command, sandbox.state_dir, *only, "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| figure | value | baseline | ratio | goal | met |" in result.stdout
    assert "| relay throughput" in result.stdout
    assert "| delta: seconds per micro-batch, table of 20,000 rows |" in result.stdout

    report = json.loads(output.read_text())
    rounds = settings("smoke").rounds
    assert report["mode"] == "smoke"
    assert report["machine"]["nproc"] >= 1
    figures = {figure["key"]: figure for figure in report["figures"]}
    for key, figure in figures.items():  # measured, or not measured with the reason
        assert figure["runs"] or figure["note"].startswith("not measured: "), (key, figure)
        assert figure["title"] in result.stdout, key
    for key in COMPARED:
        figure = figures[key]
        assert figure["note"] == "", (key, figure["note"])
        assert figure["runs"] and all(run > 0 for run in figure["runs"]), key
        assert len(figure["baseline_runs"]) == len(figure["runs"]), key
        assert all(run > 0 for run in figure["baseline_runs"]), key
        assert figure["ratio"] == pytest.approx(figure["median"] / figure["baseline_median"])
    assert len(figures["apply.rows"]["runs"]) == rounds
    p99 = figures["latency.p99"]
    assert len(p99["runs"]) == rounds and all(0 < run < 10_000 for run in p99["runs"])
    assert p99["goals"] == ["≤ 150 ms"]
    for key in ("memory.worker", "memory.relay"):
        assert 0 < figures[key]["median"] < 1024
    for key in ("relay.cpu", "relay.rss", "worker.cpu", "worker.rss"):
        assert len(figures[key]["runs"]) == rounds and all(r > 0 for r in figures[key]["runs"])
    for kind in ("delta", "iceberg"):
        assert figures[f"table_formats.{kind}.time"]["goals"] == ["≤ 1.5x"]
        assert figures[f"table_formats.{kind}.rss"]["goals"] == ["≤ 1.3x"]
        files = figures[f"table_formats.{kind}.files"]
        assert files["note"] == "", files["note"]
        assert files["details"]["micro-batches"] >= 1
        assert 1 <= files["median"] <= files["baseline_median"]
        assert files["goals"] == ["≤ 8 files"]
    assert figures["table_formats.delta.throughput"]["goals"] == ["≥ 0.5x"]
    assert figures["table_formats.parquet.time"]["goals"] == []
