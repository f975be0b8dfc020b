"""Smoke test of ``python -m bench``: the quick suite's stack figures measure and report.

Runs the relay, latency, apply, verify and memory groups in quick mode against the test
sandbox (``--use-sandbox``, so no second sandbox starts); the capture and
snapshot groups only add pgbench and a SparkSession, which other tests cover
(the capture group's consumers and durable switch: ``test_bench_capture.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgshovel.sandbox import SandboxConnection

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_quick_bench_reports_every_run_and_prints_the_table(
    sandbox: SandboxConnection, tmp_path: Path
) -> None:
    output = tmp_path / "latest.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--mode",
            "quick",
            "--use-sandbox",
            sandbox.state_dir,
            "--only",
            "relay",
            "--only",
            "latency",
            "--only",
            "apply",
            "--only",
            "verify",
            "--only",
            "memory",
            "--output",
            str(output),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| figure | value | baseline | ratio | goal | met |" in result.stdout
    assert "| relay throughput" in result.stdout

    report = json.loads(output.read_text())
    assert report["mode"] == "quick"
    assert report["machine"]["nproc"] >= 1
    figures = {figure["key"]: figure for figure in report["figures"]}
    for key in ("relay.throughput", "apply.rows", "verify.rows"):
        figure = figures[key]
        assert figure["note"] == "", figure["note"]
        assert len(figure["runs"]) == 3 and all(run > 0 for run in figure["runs"])
        assert len(figure["baseline_runs"]) == 3 and all(r > 0 for r in figure["baseline_runs"])
        assert figure["ratio"] == pytest.approx(figure["median"] / figure["baseline_median"])
    staged = figures["apply.staged"]  # measured, or not measured with the reason
    assert len(staged["runs"]) == 3 or staged["note"].startswith("not measured: "), staged
    p99 = figures["latency.p99"]
    assert len(p99["runs"]) == 3 and all(0 < run < 10_000 for run in p99["runs"])
    assert p99["goals"] == ["≤ 150 ms"]
    for key in ("memory.worker", "memory.relay"):
        figure = figures[key]
        assert figure["note"] == "", figure["note"]
        assert len(figure["runs"]) == 1 and len(figure["baseline_runs"]) == 1
        assert 0 < figure["median"] < 1024 and figure["baseline_median"] > 0
    for key in ("relay.cpu", "relay.rss", "worker.cpu", "worker.rss"):
        assert len(figures[key]["runs"]) == 3 and all(run > 0 for run in figures[key]["runs"])
