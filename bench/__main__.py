"""``python -m bench --mode full|quick`` (``make bench``): start a sandbox, run the suite, report.

The bench starts its own sandbox in ``.bench/sandbox`` (purged before and
after, so every run starts from empty servers) and always stops it, on
errors and on SIGINT/SIGTERM too. Each group of figures runs on its own; a
group that fails is reported as "not measured: <why>" and the rest still run,
because benchmarks report and never fail a build (the exit status is 0 unless
the sandbox itself cannot start). Every raw run lands in
``bench/results/latest.json``; the Markdown table is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from bench import (
    _stack,
    apply,
    capture,
    failover,
    latency,
    memory,
    relay,
    scaling,
    snapshot,
    table_formats,
    table_snapshot,
    verify,
)
from bench._modes import MODES, Settings, settings
from bench._report import Figure, document, render_table
from pgshovel import sandbox as sandboxes
from pgshovel.sandbox import SandboxConnection

logger = logging.getLogger("bench")

ROOT = Path(__file__).resolve().parents[1]
GROUPS = (
    "capture",
    "relay",
    "latency",
    "table_snapshot",
    "failover",
    "snapshot",
    "verify",
    "apply",
    "scaling",
    "memory",
    "table_formats",
)


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


class Suite:
    """Runs the groups against one sandbox; collects figures, never raises for a group."""

    def __init__(
        self, connection: SandboxConnection, bench: Settings, workdir: Path, profile: bool
    ) -> None:
        self.sandbox = connection
        self.settings = bench
        self.workdir = workdir
        self.profile = profile
        self.figures: list[Figure] = []
        self.spark: Any = None

    def group(
        self, name: str, run: Callable[[], list[Figure]], empty: Callable[[], list[Figure]]
    ) -> None:
        started = time.monotonic()
        logger.info("running %s", name)
        try:
            made = run()
        except Exception as error:
            logger.exception("%s failed; reported as not measured", name)
            made = empty()
            for figure in made:
                figure.values = []
                figure.note = f"not measured: {type(error).__name__}: {error}"[:300]
        self.figures.extend(made)
        logger.info("%s done in %.0fs", name, time.monotonic() - started)

    def spark_session(self) -> Any:
        if self.spark is None:
            from pgshovel.replication.config import SparkSettings
            from pgshovel.replication.spark import spark_session

            cores = max(1, os.cpu_count() or 1)
            self.spark = spark_session(
                SparkSettings(
                    master=f"local[{cores}]",
                    app_name="pgshovel-bench",
                    conf={
                        "spark.ui.enabled": "false",
                        "spark.sql.shuffle.partitions": str(cores),
                        "spark.default.parallelism": str(cores),
                    },
                )
            )
        return self.spark

    def run(self, groups: list[str]) -> None:
        s, sb, wd = self.settings, self.sandbox, self.workdir
        _stack.initialize_cluster(sb)
        steps: dict[str, tuple[Callable[[], list[Figure]], Callable[[], list[Figure]]]] = {
            "capture": (
                lambda: capture.figures(capture.measure(sb.postgres_dsn, s, wd), s),
                lambda: capture.figures(capture.CaptureRuns(), s),
            ),
            "relay": (
                lambda: relay.figures(relay.measure(sb, s, wd, self.profile), s),
                lambda: relay.figures(relay.RelayRuns(), s),
            ),
            "latency": (
                lambda: latency.figures(latency.measure(sb, s, wd), s),
                lambda: latency.figures(latency.LatencyRuns(), s),
            ),
            "table_snapshot": (
                lambda: table_snapshot.figures(table_snapshot.measure(sb, s, wd), s),
                lambda: table_snapshot.figures(table_snapshot.TableSnapshotRuns(), s),
            ),
            "failover": (
                lambda: failover.figures(failover.measure(sb, s, wd), s),
                lambda: failover.figures(failover.FailoverRuns(), s),
            ),
            "snapshot": (
                lambda: snapshot.figures(snapshot.measure(sb, s, self.spark_session()), s),
                lambda: snapshot.figures(snapshot.SnapshotRuns(), s),
            ),
            "verify": (
                lambda: verify.figures(verify.measure(sb, s), s),
                lambda: verify.figures(verify.VerifyRuns(), s),
            ),
            "apply": (
                lambda: apply.figures(apply.measure(sb, s, wd, self.profile), s),
                lambda: apply.figures(apply.ApplyRuns(), s),
            ),
            "scaling": (
                lambda: scaling.figures(scaling.measure(sb, s, wd), s),
                lambda: scaling.figures(scaling.ScalingRuns(), s),
            ),
            "memory": (
                lambda: memory.figures(memory.measure(sb, s, wd), s),
                lambda: memory.figures(memory.MemoryRuns(), s),
            ),
            "table_formats": (
                lambda: table_formats.figures(table_formats.measure(sb, s, wd), s),
                lambda: table_formats.figures(table_formats.TableFormatRuns(), s),
            ),
        }
        try:
            for name in groups:
                measure, empty = steps[name]
                self.group(name, measure, empty)
        finally:
            if self.spark is not None:
                self.spark.stop()
                self.spark = None


def _raise_interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="full")
    parser.add_argument(
        "--only",
        action="append",
        choices=GROUPS,
        help="run only this group (repeatable); default: all",
    )
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "latest.json")
    parser.add_argument("--state-dir", type=Path, default=ROOT / ".bench" / "sandbox")
    parser.add_argument(
        "--use-sandbox",
        type=Path,
        help="state directory of a running sandbox to use (left running) instead of starting one",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="add one relay and one worker run under cProfile (not counted); "
        "top functions go to the JSON and .bench/work/*-profile.txt",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse_arguments(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr
    )
    for noisy in ("pgshovel", "kazoo", "py4j", "pyiceberg"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger(_stack.KAFKA_LOG.name).setLevel(logging.ERROR)
    bench = settings(options.mode)
    groups = options.only or list(GROUPS)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.monotonic()
    machine = machine_info()
    state_dir: Path = options.state_dir.resolve()
    workdir = state_dir.parent / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    logger.info(
        "mode %s on %s cores, load %s",
        bench.mode,
        machine["nproc"],
        machine["load_average_at_start"],
    )
    suite: Suite | None = None
    if options.use_sandbox is not None:
        suite = Suite(sandboxes.load(options.use_sandbox), bench, workdir, options.profile)
        suite.run(groups)
    else:
        sandboxes.stop(state_dir, purge=True)
        try:
            suite = Suite(sandboxes.start(state_dir), bench, workdir, options.profile)
            suite.run(groups)
        finally:
            sandboxes.stop(state_dir, purge=True)
    figures = suite.figures if suite is not None else []
    result = document(figures, bench.mode, machine, started_at, time.monotonic() - started)
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"\npgshovel benchmarks, mode {bench.mode}, {result['seconds']:.0f}s; raw runs in "
        f"{options.output}\n"
    )
    print(render_table(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
