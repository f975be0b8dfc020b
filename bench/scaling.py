"""Scaling: the staged apply on one Spark core against two, and one partition against four.

The apply group's workload (``apply.produce_stream``) is applied by the
worker with every eligible micro-batch staged by Spark tasks and committed
once (``apply.worker_run`` with a session), first on a ``local[1]`` session,
then on a ``local[2]`` one (a session per master: Spark keeps one per
process), in alternating rounds within each session, each session's first
run a warm-up that is not counted. Every run cuts its micro-batches into
tasks of a quarter of the workload's row changes (``stage_task_rows``): four
tasks of the one-partition stream, one per partition of the four, so two
cores have tasks to share and both streams run the same number. The same workload is
also relayed to a set topic of four partitions (``partitions: 4``, the topic
created first as the sandbox's 0.9 broker requires) and applied on the
``local[2]`` session in rounds alternating with the one-partition stream.
Each run's mutations/s and CPU seconds of the worker and its JVM per mutation
are kept. Then the sandbox's Spark standalone cluster (``start_spark``: a
Master and Workers of one core each, as child processes on 127.0.0.1) runs the
one-partition stream with one worker, then with two (a warm-up and ``rounds``
runs each; its executors' CPU is in other processes, so only mutations/s is
kept). The figures (local[2] against local[1], two standalone workers against
one, four partitions against one) are reported without a goal: the scaling
table of issue 26.
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
from pgshovel.sandbox import SandboxConnection, start_spark, stop_spark

logger = logging.getLogger(__name__)

MASTERS = ("local[1]", "local[2]")
#: the partitioned stream's set, source database and partitions
PARTITIONED_SET = "apply_partitioned"
PARTITIONED_SOURCE = "pgshovel_bench_apply_partitioned"
PARTITIONS = 4
#: the standalone cluster's workers, of one core each: one, then two
STANDALONE_WORKERS = (1, 2)


@dataclass
class ScalingRuns:
    mutations: int = 0
    #: master -> mutations/s of each run
    rates: dict[str, list[float]] = field(default_factory=dict)
    #: master -> CPU microseconds per mutation (worker and its JVM) of each run
    cpu_us: dict[str, list[float]] = field(default_factory=dict)
    #: partitions -> mutations/s and CPU µs per mutation of each run on the last master
    partition_rates: dict[int, list[float]] = field(default_factory=dict)
    partition_cpu_us: dict[int, list[float]] = field(default_factory=dict)
    #: standalone workers (of one core each) -> mutations/s of each run
    standalone_rates: dict[int, list[float]] = field(default_factory=dict)
    #: why nothing was measured (empty: measured)
    note: str = ""


#: quick and smoke runs leave the group out: two Spark sessions cost more than CI's bench budget
FULL_ONLY_NOTE = "full mode only (two Spark sessions): make bench"


def measure(sandbox: SandboxConnection, settings: Settings, workdir: Path) -> ScalingRuns:
    if settings.mode != "full":
        return ScalingRuns(note=FULL_ONLY_NOTE)
    stream = apply.produce_stream(sandbox, settings, workdir)
    partitioned = apply.produce_stream(
        sandbox,
        settings,
        workdir,
        set_name=PARTITIONED_SET,
        source_name=PARTITIONED_SOURCE,
        partitions=PARTITIONS,
    )
    if partitioned.mutations != stream.mutations:
        raise RuntimeError("the partitioned stream does not hold the same workload")
    runs = ScalingRuns(mutations=stream.mutations)
    shapes = {
        1: read_table_shapes(_stack.set_configuration(stream.source, [_schema.ORDERS])),
        PARTITIONS: read_table_shapes(
            _stack.set_configuration(partitioned.source, [_schema.ORDERS])
        ),
    }
    for master in MASTERS:
        spark: Any = spark_session(SparkSettings(master=master, conf={"spark.ui.enabled": "false"}))
        try:
            # Not counted: the session's first job pays the JVM's class loading and JIT.
            _run(sandbox, stream, shapes[1], spark, apply.SET)
            for number in range(settings.rounds):
                rate, cpu = _run(sandbox, stream, shapes[1], spark, apply.SET)
                runs.rates.setdefault(master, []).append(rate)
                runs.cpu_us.setdefault(master, []).append(cpu)
                logger.info(
                    "scaling round %d %s: %.0f mutations/s, %.1f µs CPU per mutation",
                    number + 1,
                    master,
                    rate,
                    cpu,
                )
                if master != MASTERS[-1]:
                    continue
                runs.partition_rates.setdefault(1, []).append(rate)
                runs.partition_cpu_us.setdefault(1, []).append(cpu)
                rate, cpu = _run(sandbox, partitioned, shapes[PARTITIONS], spark, PARTITIONED_SET)
                runs.partition_rates.setdefault(PARTITIONS, []).append(rate)
                runs.partition_cpu_us.setdefault(PARTITIONS, []).append(cpu)
                logger.info(
                    "scaling round %d %s, %d partitions: %.0f mutations/s, %.1f µs CPU each",
                    number + 1,
                    master,
                    PARTITIONS,
                    rate,
                    cpu,
                )
        finally:
            spark.stop()
    try:
        for workers in STANDALONE_WORKERS:
            cluster = start_spark(Path(sandbox.state_dir), workers=workers, cores=1)
            spark = spark_session(
                SparkSettings(master=cluster.master_url, conf={"spark.ui.enabled": "false"})
            )
            try:
                _run(sandbox, stream, shapes[1], spark, apply.SET)  # warm-up, not counted
                for number in range(settings.rounds):
                    rate, _cpu = _run(sandbox, stream, shapes[1], spark, apply.SET)
                    runs.standalone_rates.setdefault(workers, []).append(rate)
                    logger.info(
                        "scaling round %d standalone, %d workers: %.0f mutations/s",
                        number + 1,
                        workers,
                        rate,
                    )
            finally:
                spark.stop()
    finally:
        stop_spark(Path(sandbox.state_dir))
    return runs


def _run(
    sandbox: SandboxConnection, stream: apply.Stream, tables: Any, spark: Any, set_name: str
) -> tuple[float, float]:
    """Mutations/s and CPU µs per mutation of one staged worker pass over ``stream``."""
    # Four tasks of a one-partition stream, one per partition of four: as many as two
    # cores can share, the same count either way.
    task_rows = max(1, stream.mutations // PARTITIONS)
    seconds, _, usage = apply.worker_run(
        sandbox, stream, tables, spark=spark, set_name=set_name, task_rows=task_rows
    )
    return stream.mutations / seconds, usage.cpu_seconds * 1_000_000 / max(1, stream.mutations)


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
            key="scaling.standalone",
            title="apply staged, Spark standalone, 2 workers of 1 core (mutations/s)",
            unit="/s",
            values=runs.standalone_rates.get(STANDALONE_WORKERS[-1], []),
            baseline=runs.standalone_rates.get(STANDALONE_WORKERS[0], []),
            baseline_title="1 worker of 1 core, same stream",
            details=details,
            note=runs.note,
        ),
        Figure(
            key="scaling.partitions",
            title=f"apply staged, Spark {two}, set topic of {PARTITIONS} partitions (mutations/s)",
            unit="/s",
            values=runs.partition_rates.get(PARTITIONS, []),
            baseline=runs.partition_rates.get(1, []),
            baseline_title="one partition, same workload",
            details=details,
            note=runs.note,
        ),
        Figure(
            key="scaling.partitions_cpu",
            title=f"apply staged, {PARTITIONS} partitions: CPU µs per mutation (worker and JVM)",
            unit="µs",
            values=runs.partition_cpu_us.get(PARTITIONS, []),
            baseline=runs.partition_cpu_us.get(1, []),
            baseline_title="one partition, same workload",
            details=details,
            note=runs.note,
        ),
    ]
