"""Scaling: the staged apply on one Spark core against two, with throughput and CPU per mutation.

The apply group's workload (``apply.produce_stream``) is applied by the
worker with every eligible micro-batch staged by Spark tasks and committed
once (``apply.worker_run`` with a session), first on a ``local[1]`` session,
then on a ``local[2]`` one (a session per master: Spark keeps one per
process), in alternating rounds within each session. Each run's mutations/s
and CPU seconds of the worker and its JVM per mutation are kept; the figures
are local[2] against local[1], reported without a goal: the scaling table of
issue 26. Partitions 1 against 4 are not measured: the bench's sets publish to
one partition (``_stack.create_set`` has no partitions setting yet).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import _schema, _stack, apply
from bench._modes import Settings
from bench._report import Figure
from pgshovel.replication.config import SparkSettings
from pgshovel.replication.spark import spark_session
from pgshovel.replication.worker import read_table_shapes
from pgshovel.sandbox import SandboxConnection

logger = logging.getLogger(__name__)

MASTERS = ("local[1]", "local[2]")
PARTITIONS_NOTE = (
    "not measured: the bench's sets publish to one partition "
    "(bench/_stack.py create_set has no partitions setting yet)"
)


@dataclass
class ScalingRuns:
    mutations: int = 0
    #: master -> mutations/s of each run
    rates: dict[str, list[float]] = field(default_factory=dict)
    #: master -> CPU microseconds per mutation (worker and its JVM) of each run
    cpu_us: dict[str, list[float]] = field(default_factory=dict)
    #: why nothing was measured (empty: measured)
    note: str = ""


#: quick and smoke runs leave the group out: two Spark sessions cost more than CI's bench budget
FULL_ONLY_NOTE = "full mode only (two Spark sessions): make bench"


def measure(sandbox: SandboxConnection, settings: Settings, workdir: Path) -> ScalingRuns:
    if settings.mode != "full":
        return ScalingRuns(note=FULL_ONLY_NOTE)
    stream = apply.produce_stream(sandbox, settings, workdir)
    tables = read_table_shapes(_stack.set_configuration(stream.source, [_schema.ORDERS]))
    runs = ScalingRuns(mutations=stream.mutations)
    for master in MASTERS:
        spark: Any = spark_session(SparkSettings(master=master, conf={"spark.ui.enabled": "false"}))
        try:
            for number in range(settings.rounds):
                seconds, _, usage = apply.worker_run(sandbox, stream, tables, spark=spark)
                runs.rates.setdefault(master, []).append(stream.mutations / seconds)
                cpu = usage.cpu_seconds * 1_000_000 / max(1, stream.mutations)
                runs.cpu_us.setdefault(master, []).append(cpu)
                logger.info(
                    "scaling round %d %s: %.0f mutations/s, %.1f µs CPU per mutation",
                    number + 1,
                    master,
                    runs.rates[master][-1],
                    cpu,
                )
        finally:
            spark.stop()
    return runs


def figures(runs: ScalingRuns, settings: Settings) -> list[Figure]:
    details = {"mutations": runs.mutations, "path": "staged on Spark tasks, committed once"}
    one, two = MASTERS
    return [
        Figure(
            key="scaling.cores",
            title=f"apply staged, Spark {two} (mutations/s)",
            unit="/s",
            values=runs.rates.get(two, []),
            baseline=runs.rates.get(one, []),
            baseline_title=f"Spark {one}, same stream",
            details=details,
            note=runs.note,
        ),
        Figure(
            key="scaling.cores_cpu",
            title=f"apply staged, Spark {two}: CPU µs per mutation (worker and JVM)",
            unit="µs",
            values=runs.cpu_us.get(two, []),
            baseline=runs.cpu_us.get(one, []),
            baseline_title=f"Spark {one}, same stream",
            details=details,
            note=runs.note,
        ),
        Figure(
            key="scaling.partitions",
            title="apply staged, partitions 4 (mutations/s)",
            unit="/s",
            baseline_title="partitions 1",
            note=PARTITIONS_NOTE,
        ),
    ]
