"""Apply: worker mutations/s on a mixed stream into PostgreSQL ÷ binary COPY of as many rows.

The source starts empty; the bench notes the topic offset and the source's
``txid_current_snapshot()``, then commits a mixed workload (4 inserts : 2
updates : 1 delete, 1,000-row transactions) that a running relay publishes.
Each worker run resets the target to "snapshot taken at that point, no rows"
and times ``Worker.stream`` (read, validate, handoff filter, COPY into staging
and a set-based merge, state in the same transaction) until the last batch is
applied; the target's row count is then checked against the source. The
baseline times ``COPY ... FROM STDIN (FORMAT binary)`` of the same number of
rows into a table of the same shape. The worker also runs with the target's audit
table on (``apply.audit``: one more row per mutation, copied in the same
transaction), against the runs with it off. A fourth variant only reads, parses and
validates the stream (``apply.read_floor``): the part of the apply cost that a
Python driver decoding one protobuf message per mutation cannot shed. A fifth
(``apply.staged``) runs the worker with a local[2] SparkSession and every
micro-batch the staged path takes staged by Spark tasks and committed once,
after one uncounted run (as the scaling group's warm-up: the session's first
job starts Spark's Python workers, a cost a running worker pays once). The
worker runs in this process, so its CPU seconds and peak RSS are this
process's plus its children (Spark's JVM).
"""

from __future__ import annotations

import cProfile
import io
import logging
import os
import pstats
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
from psycopg2 import sql

from bench import _proc, _schema, _stack, _workload
from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import per_million, schedule
from pgshovel.replication.config import ReplicationConfiguration, SparkSettings
from pgshovel.replication.loaders import PostgresSnapshotLoader
from pgshovel.replication.spark import spark_session
from pgshovel.replication.staged import TASK_ROWS
from pgshovel.replication.streams import KafkaStream
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.replication.worker import Worker, read_table_shapes
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import TableShape
from pgshovel.stream.plan import MicroBatchPlan
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.reader import KafkaReader
from pgshovel.stream.state import WorkerState
from pgshovel.stream.validation import StreamValidator

logger = logging.getLogger(__name__)

SET = "apply"
SOURCE = "pgshovel_bench_apply_source"
TARGET = "pgshovel_bench_apply_target"
COPY_TABLE = "orders_binary_copy"
CHUNK = 1000


@dataclass
class ApplyRuns:
    worker_rates: list[float] = field(default_factory=list)
    audit_rates: list[float] = field(default_factory=list)
    copy_rates: list[float] = field(default_factory=list)
    cpu_per_million: list[float] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    read_rates: list[float] = field(default_factory=list)
    #: the worker with every micro-batch staged by Spark tasks (local[2]), committed once
    staged_rates: list[float] = field(default_factory=list)
    #: why the staged variant was not measured ("" when it was)
    staged_note: str = ""
    mutations: int = 0
    profile: list[str] = field(default_factory=list)


class CountingTarget(PostgresTarget):
    """The real PostgreSQL target, noting how far the worker got (to stop it at the end)."""

    def __init__(self, dsn: str, end_offset: int, audit: bool = False) -> None:
        super().__init__(dsn, audit=audit)
        self.end_offset = end_offset
        self.next_offset = 0
        self.mutations = 0
        #: micro-batches committed on the staged path
        self.staged = 0

    def done(self) -> bool:
        return self.next_offset >= self.end_offset

    def apply(self, plan: MicroBatchPlan, state: WorkerState, commit: bool = True) -> int:
        rows = super().apply(plan, state, commit)
        self.mutations += sum(len(changes.batch.mutations) for changes in plan.batches)
        if commit:
            self.next_offset = state.position.messages
        return rows

    def commit_stages(self, prefix: str, stages: Any, state: WorkerState) -> int:
        rows = super().commit_stages(prefix, stages, state)
        self.next_offset = state.position.messages
        self.staged += 1
        return rows


@dataclass(frozen=True)
class Stream:
    """Where the workload sits on the topic and what the source looked like before it."""

    source: str
    snapshot: str
    start: int
    end: int
    mutations: int
    #: the first offset of each partition of a partitioned set topic (empty: one partition,
    #: ``start``); ``start`` and ``end`` are then sums over the partitions, as positions count
    partition_starts: tuple[int, ...] = ()

    @property
    def starts(self) -> tuple[int, ...]:
        return self.partition_starts or (self.start,)


def produce_stream(
    sandbox: SandboxConnection,
    settings: Settings,
    workdir: Path,
    set_name: str = SET,
    source_name: str = SOURCE,
    partitions: int = 1,
) -> Stream:
    """Create the source and its set, run the mixed workload through a relay onto the topic
    (of ``partitions`` partitions, created first as the sandbox's broker requires)."""
    source = _stack.create_database(sandbox, source_name)
    _stack.execute(source, [_schema.ORDERS_DDL])
    _stack.create_set(sandbox, set_name, source, [_schema.ORDERS])
    topic = _stack.topic_of(set_name)
    kafka = sandbox.kafka_config()
    if partitions != 1:
        _stack.create_partitioned_topic(sandbox, topic, partitions)
    config = _stack.write_relay_yml(
        workdir / f"relay-{set_name}.yml", sandbox, partitions=partitions
    )
    relay = _stack.RelayProcess(sandbox, config, set_name, workdir / f"relay-{set_name}.log")
    try:
        # One row in and out: the relay leads, the topic exists, the source is empty again.
        _stack.execute(source, [_schema.insert_orders(0, 1), _schema.delete_orders(0, 1)])
        _stack.wait_for(
            lambda: _stack.queue_drained(source, set_name), 90, "the apply relay", relay
        )
        starts = _stack.end_offsets(kafka, topic, partitions)
        snapshot = str(_stack.fetch_value(source, "SELECT txid_current_snapshot()::text"))
        plan = _workload.mixed_plan(settings.apply_mutations, CHUNK)
        conn = psycopg2.connect(source)
        try:
            for steps in plan:
                with conn, conn.cursor() as cursor:
                    for step in steps:
                        statement = {
                            "insert": _schema.insert_orders,
                            "update": _schema.update_orders,
                            "delete": _schema.delete_orders,
                        }[step.operation]
                        cursor.execute(statement(step.first, step.count))
        finally:
            conn.close()
        _stack.wait_for(
            lambda: _stack.queue_drained(source, set_name),
            max(120.0, settings.apply_mutations / 500),
            "the relay to publish the apply workload",
            relay,
        )
        ends = _stack.end_offsets(kafka, topic, partitions)
    finally:
        relay.stop()
    mutations = _workload.total_mutations(plan)
    if partitions == 1:
        return Stream(source, snapshot, starts[0], ends[0], mutations)
    return Stream(source, snapshot, sum(starts), sum(ends), mutations, starts)


def worker_run(
    sandbox: SandboxConnection,
    stream: Stream,
    tables: list[TableShape],
    profiler: cProfile.Profile | None = None,
    set_name: str = SET,
    target_database: str = TARGET,
    driver_only: bool = False,
    audit: bool = False,
    spark: Any = None,
    task_rows: int = TASK_ROWS,
) -> tuple[float, int, _proc.Usage]:
    """Seconds, mutations applied on the driver and resource use of one worker pass over the
    stream (of this process and its children, or with ``driver_only`` of this process
    alone); ``audit`` turns the target's audit table on; with ``spark``, every micro-batch
    the staged path takes is staged by Spark tasks (of about ``task_rows`` row changes)
    and committed once (an error if none was)."""
    kafka = sandbox.kafka_config()
    properties = {key: value for key, value in kafka.items() if key != "bootstrap.servers"}
    target = CountingTarget(
        _stack.create_database(sandbox, target_database), stream.end, audit=audit
    )
    reader = KafkaStream(
        kafka["bootstrap.servers"], _stack.topic_of(set_name), properties, poll_timeout=0.2
    )
    configuration = ReplicationConfiguration(
        spark=SparkSettings(),
        loader=PostgresSnapshotLoader(),
        stream=reader,
        target=target,
        stage_min_mutations=1 if spark is not None else 20_000,
        stage_task_rows=task_rows,
    )
    set_configuration = _stack.set_configuration(stream.source, [_schema.ORDERS])
    worker = Worker(_stack.CLUSTER, set_name, set_configuration, configuration, spark=spark)
    # The workload began after stream.snapshot, so the handoff drops nothing of it; the staged
    # run starts from a snapshot before every transaction so that the handoff ends at the first
    # batch instead of holding the one micro-batch of a quick run on the driver.
    snapshot = "1:1:" if spark is not None else stream.snapshot
    state = WorkerState(
        "streaming", snapshot, StreamPosition.start(stream.starts), tables=tuple(tables)
    )
    target.open(_stack.CLUSTER, set_name)
    reader.open(_stack.topic_of(set_name))
    try:
        target.begin_snapshot(state.replace(phase="snapshot"))
        target.finish_snapshot(state)
        pids = [os.getpid()] if driver_only else _proc.family(os.getpid())
        _proc.reset_peak(pids)
        before = _proc.usage(pids)
        started = time.monotonic()
        if profiler is not None:
            profiler.enable()
        try:
            worker.stream(state, target.done)
        finally:
            if profiler is not None:
                profiler.disable()
        seconds = time.monotonic() - started
        after = _proc.usage(pids)
        copied = _stack.fetch_value(
            target.dsn,
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("public", _schema.ORDERS)),
        )
        audited = (
            _stack.fetch_value(target.dsn, "SELECT count(*) FROM pgshovel_replication.audit")
            if audit
            else target.mutations
        )
    finally:
        reader.close()
        target.close()
    if spark is not None and not target.staged:
        raise RuntimeError("no micro-batch took the staged path; the staged run is not valid")
    if audited != target.mutations:
        raise RuntimeError(
            f"the audit table holds {audited!r} rows for {target.mutations!r} mutations "
            "applied; the worker run is not valid"
        )
    expected = _stack.fetch_value(
        stream.source,
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("public", _schema.ORDERS)),
    )
    if copied != expected:
        raise RuntimeError(
            f"after applying the stream the target holds {copied!r} orders, the source "
            f"{expected!r}; the worker run is not valid"
        )
    usage = _proc.Usage(after.cpu_seconds - before.cpu_seconds, after.peak_rss)
    return seconds, target.mutations, usage


def read_floor_run(sandbox: SandboxConnection, stream: Stream) -> float:
    """Mutations/s of reading the stream, parsing and validating every message, nothing
    else: what the worker's driver cannot go below in Python, whatever it applies."""
    kafka = sandbox.kafka_config()
    properties = {key: value for key, value in kafka.items() if key != "bootstrap.servers"}
    reader = KafkaReader(kafka["bootstrap.servers"], _stack.topic_of(SET), properties)
    validator = StreamValidator()
    mutations = 0
    try:
        reader.seek(stream.start)
        started = time.monotonic()
        offset = stream.start - 1
        while offset < stream.end - 1:
            messages = reader.read(50_000, 1.0)
            if not messages:
                raise RuntimeError(f"the topic ended at offset {offset!r}, before {stream.end!r}")
            offset = messages[-1][0]
            for batch in validator.validate(messages):
                mutations += len(batch.mutations)
        seconds = time.monotonic() - started
    finally:
        reader.close()
    return mutations / seconds


def binary_rows(source: str, rows: int) -> bytes:
    """``rows`` orders in COPY binary format (generated on the source, not inserted)."""
    query = sql.SQL("COPY (SELECT * FROM ({}) AS o) TO STDOUT (FORMAT binary)").format(
        sql.SQL(
            "SELECT i AS id, ((i * 7919) % 100000)::integer AS customer_id,"
            " 'paid'::text AS status,"
            " (((i * 37) % 100000) / 100.0)::numeric(12, 2) AS total, now() AS created_at,"
            " md5(i::text) || md5((i + 1)::text) AS note"
            " FROM generate_series(1::bigint, {}::bigint) AS i"
        ).format(sql.Literal(rows))
    )
    buffer = io.BytesIO()
    conn = _stack.connect_autocommit(source)
    try:
        with conn.cursor() as cursor:
            cursor.copy_expert(query.as_string(conn), buffer)
    finally:
        conn.close()
    return buffer.getvalue()


def copy_run(target: str, data: bytes) -> float:
    """Seconds of one binary COPY of ``data`` into an emptied copy of the orders table."""
    table = sql.Identifier("public", COPY_TABLE)
    conn = psycopg2.connect(target)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql.SQL("TRUNCATE {}").format(table))
            conn.commit()
            started = time.monotonic()
            copy = sql.SQL("COPY {} FROM STDIN (FORMAT binary)").format(table)
            cursor.copy_expert(copy.as_string(conn), io.BytesIO(data))
            conn.commit()
            return time.monotonic() - started
    finally:
        conn.close()


def profiled_run(
    sandbox: SandboxConnection, stream: Stream, tables: list[TableShape], workdir: Path
) -> list[str]:
    """One extra worker pass under cProfile (not counted); its top functions by own time."""
    profiler = cProfile.Profile()
    worker_run(sandbox, stream, tables, profiler)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)
    (workdir / "worker-apply-profile.txt").write_text(text.getvalue())
    table = text.getvalue().split("ncalls", 1)[-1].splitlines()[1:26]
    return [" ".join(line.split()) for line in table if line.strip()]


def measure(
    sandbox: SandboxConnection, settings: Settings, workdir: Path, profile: bool = False
) -> ApplyRuns:
    stream = produce_stream(sandbox, settings, workdir)
    tables = read_table_shapes(_stack.set_configuration(stream.source, [_schema.ORDERS]))
    copy_target = _stack.create_database(sandbox, f"{TARGET}_copy")
    _stack.execute(copy_target, [_schema.ORDERS_DDL])
    _stack.execute(
        copy_target,
        [
            sql.SQL("ALTER TABLE {} RENAME TO {}").format(
                sql.Identifier("public", _schema.ORDERS), sql.Identifier(COPY_TABLE)
            )
        ],
    )
    data = binary_rows(stream.source, stream.mutations)
    runs = ApplyRuns(mutations=stream.mutations)
    spark: Any = None
    try:
        spark = spark_session(SparkSettings(master="local[2]", conf={"spark.ui.enabled": "false"}))
    except Exception as error:  # the other variants are still measured
        logger.exception("no SparkSession for the staged variant")
        runs.staged_note = f"not measured: {type(error).__name__}: {error}"[:300]
    try:
        _rounds(sandbox, settings, stream, tables, copy_target, data, runs, spark)
    finally:
        if spark is not None:
            spark.stop()
    if profile:
        runs.profile = profiled_run(sandbox, stream, tables, workdir)
    return runs


def _rounds(
    sandbox: SandboxConnection,
    settings: Settings,
    stream: Stream,
    tables: list[TableShape],
    copy_target: str,
    data: bytes,
    runs: ApplyRuns,
    spark: Any,
) -> None:
    """The alternating rounds of every variant, into ``runs`` (the staged variant after one
    uncounted run: the session's first job starts Spark's Python workers)."""
    if not runs.staged_note:
        try:
            worker_run(sandbox, stream, tables, spark=spark)
        except Exception as error:  # reported on its figure; the other variants go on
            logger.exception("the staged apply's warm-up run failed")
            runs.staged_note = f"not measured: {type(error).__name__}: {error}"[:300]
    variants = ["worker", "staged", "audit", "copy", "read"]
    for number, variant in schedule(settings.rounds, variants):
        if variant == "staged":
            if runs.staged_note:
                continue
            try:
                seconds, _, _ = worker_run(sandbox, stream, tables, spark=spark)
            except Exception as error:  # reported on its figure; the other variants go on
                logger.exception("the staged apply failed")
                runs.staged_rates.clear()
                runs.staged_note = f"not measured: {type(error).__name__}: {error}"[:300]
                continue
            runs.staged_rates.append(stream.mutations / seconds)
            rate = runs.staged_rates[-1]
        elif variant == "read":
            runs.read_rates.append(read_floor_run(sandbox, stream))
            rate = runs.read_rates[-1]
        elif variant == "audit":
            seconds, mutations, _ = worker_run(sandbox, stream, tables, audit=True)
            runs.audit_rates.append(mutations / seconds)
            rate = runs.audit_rates[-1]
        elif variant == "worker":
            seconds, mutations, usage = worker_run(sandbox, stream, tables)
            if mutations != stream.mutations:
                raise RuntimeError(
                    f"the worker applied {mutations!r} mutations, the workload made "
                    f"{stream.mutations!r}"
                )
            runs.worker_rates.append(mutations / seconds)
            runs.cpu_per_million.append(per_million(usage.cpu_seconds, mutations) or 0.0)
            runs.peak_rss_mb.append(usage.peak_rss / (1 << 20))
            rate = runs.worker_rates[-1]
        else:
            runs.copy_rates.append(stream.mutations / copy_run(copy_target, data))
            rate = runs.copy_rates[-1]
        logger.info("apply round %d %s: %.0f rows/s", number + 1, variant, rate)


def figures(runs: ApplyRuns, settings: Settings) -> list[Figure]:
    details: dict[str, Any] = {
        "mutations": runs.mutations,
        "mix": "4 insert : 2 update : 1 delete",
    }
    return [
        Figure(
            key="apply.rows",
            title="apply, mixed stream into PostgreSQL (mutations/s)",
            unit="/s",
            values=runs.worker_rates,
            baseline=runs.copy_rates,
            baseline_title="binary COPY, same row count",
            goals=(Goal("ratio", ">=", 0.2),),
            details={**details, "profile_tottime_top": runs.profile},
        ),
        Figure(
            key="apply.staged",
            title="apply staged on Spark executors (local[2]), committed once (mutations/s)",
            unit="/s",
            values=runs.staged_rates,
            baseline=runs.copy_rates,
            baseline_title="binary COPY, same row count",
            goals=(Goal("ratio", ">=", 0.3),),
            details={**details, "stage_min_mutations": 1},
            note=runs.staged_note,
        ),
        Figure(
            key="apply.audit",
            title="apply with the audit table on (mutations/s)",
            unit="/s",
            values=runs.audit_rates,
            baseline=runs.worker_rates,
            baseline_title="audit off, same run",
            details=details,
        ),
        Figure(
            key="apply.read_floor",
            title="read, parse and validate only, nothing applied (mutations/s)",
            unit="/s",
            values=runs.read_rates,
            baseline=runs.copy_rates,
            baseline_title="binary COPY, same row count",
            details=details,
        ),
        Figure(
            key="worker.cpu",
            title="worker CPU seconds per million events (with Spark's JVM)",
            unit="s",
            values=runs.cpu_per_million,
            details=details,
        ),
        Figure(
            key="worker.rss",
            title="worker peak RSS during a run (with Spark's JVM)",
            unit="MiB",
            values=runs.peak_rss_mb,
            details=details,
        ),
    ]
