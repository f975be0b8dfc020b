"""Memory against transaction size: one huge source transaction through the relay and the worker.

One transaction inserts ``memory_rows`` orders (1,000,000 in the full bench);
the running relay publishes it as one PgQ batch, then the worker applies it in
this process like the apply bench (``apply.worker_run``, the product's default
``part_mutations``). Peak RSS of the relay process while it publishes and of
the worker's driver (this process alone: streaming runs no Spark job) while it
applies are read from ``/proc`` (``VmHWM`` reset before each phase). The
baseline is the same measurement for a transaction a hundred times smaller:
memory independent of transaction size shows as a ratio near 1, and the goal
is an absolute ceiling of 1 GiB for each process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from psycopg2 import sql

from bench import _proc, _schema, _stack, apply
from bench._modes import Settings
from bench._report import Figure, Goal
from pgshovel.replication.worker import read_table_shapes
from pgshovel.sandbox import SandboxConnection
from pgshovel.source import TableShape

logger = logging.getLogger(__name__)

SET = "memory"
SOURCE = "pgshovel_bench_memory_source"
TARGET = "pgshovel_bench_memory_target"
MIB = 1 << 20
CEILING_MIB = 1024.0


@dataclass
class MemoryRuns:
    rows: int = 0
    small_rows: int = 0
    relay_mib: list[float] = field(default_factory=list)
    relay_small_mib: list[float] = field(default_factory=list)
    worker_mib: list[float] = field(default_factory=list)
    worker_small_mib: list[float] = field(default_factory=list)
    worker_rates: list[float] = field(default_factory=list)


def one_transaction(
    sandbox: SandboxConnection,
    source: str,
    relay: _stack.RelayProcess,
    rows: int,
    tables: list[TableShape],
) -> tuple[float, float, float]:
    """Relay and worker peak RSS (MiB) and worker mutations/s for one ``rows``-row
    transaction."""
    kafka = sandbox.kafka_config()
    start = _stack.end_offset(kafka, _stack.topic_of(SET))
    snapshot = str(_stack.fetch_value(source, "SELECT txid_current_snapshot()::text"))
    _proc.reset_peak([relay.pid])
    _stack.execute(source, [_schema.insert_orders(1, rows)])
    _stack.wait_for(
        lambda: _stack.queue_drained(source, SET),
        max(120.0, rows / 1000),
        f"the relay to publish a {rows}-row transaction",
        relay,
    )
    # The topic holds the whole transaction (its batch committed with every row): the
    # queue can look drained a moment before the relay took the batch at all.
    _stack.wait_for(
        lambda: _stack.committed_mutations(kafka, _stack.topic_of(SET), start) >= rows,
        max(120.0, rows / 1000),
        f"the {rows}-row transaction on the topic",
        relay,
    )
    _stack.wait_for(lambda: _stack.queue_drained(source, SET), 60, "the batch to finish", relay)
    relay_peak = _proc.usage([relay.pid]).peak_rss / MIB
    end = _stack.end_offset(kafka, _stack.topic_of(SET))
    stream = apply.Stream(source, snapshot, start, end, rows)
    seconds, mutations, usage = apply.worker_run(
        sandbox,
        stream,
        tables,
        set_name=SET,
        target_database=TARGET,
        driver_only=True,
    )
    if mutations != rows:
        raise RuntimeError(f"the worker applied {mutations!r} mutations of {rows!r}")
    # Empty again for the next run (one TRUNCATE event, not a row event per order).
    _stack.execute(source, [sql.SQL("TRUNCATE {}").format(sql.Identifier(_schema.ORDERS))])
    _stack.wait_for(lambda: _stack.queue_drained(source, SET), 90, "the truncate", relay)
    return relay_peak, usage.peak_rss / MIB, rows / seconds


def measure(sandbox: SandboxConnection, settings: Settings, workdir: Path) -> MemoryRuns:
    source = _stack.create_database(sandbox, SOURCE)
    _stack.execute(source, [_schema.ORDERS_DDL])
    _stack.create_set(sandbox, SET, source, [_schema.ORDERS])
    tables = read_table_shapes(_stack.set_configuration(source, [_schema.ORDERS]))
    config = _stack.write_relay_yml(workdir / "relay-memory.yml", sandbox)
    relay = _stack.RelayProcess(sandbox, config, SET, workdir / "relay-memory.log")
    runs = MemoryRuns(rows=settings.memory_rows, small_rows=max(1, settings.memory_rows // 100))
    try:
        _stack.execute(source, [_schema.insert_orders(0, 1), _schema.delete_orders(0, 1)])
        _stack.wait_for(lambda: _stack.queue_drained(source, SET), 90, "the memory relay", relay)
        for rows, relay_mib, worker_mib in (
            (runs.small_rows, runs.relay_small_mib, runs.worker_small_mib),
            (runs.rows, runs.relay_mib, runs.worker_mib),
        ):
            relay_peak, worker_peak, rate = one_transaction(sandbox, source, relay, rows, tables)
            relay_mib.append(relay_peak)
            worker_mib.append(worker_peak)
            if rows == runs.rows:
                runs.worker_rates.append(rate)
            logger.info(
                "memory: %d-row transaction: relay %.0f MiB, worker driver %.0f MiB, %.0f rows/s",
                rows,
                relay_peak,
                worker_peak,
                rate,
            )
    finally:
        relay.stop()
    return runs


def figures(runs: MemoryRuns, settings: Settings) -> list[Figure]:
    details = {"rows": runs.rows, "baseline rows": runs.small_rows}
    return [
        Figure(
            key="memory.worker",
            title=f"worker driver peak RSS applying one {runs.rows:,}-row transaction",
            unit="MiB",
            values=runs.worker_mib,
            baseline=runs.worker_small_mib,
            baseline_title=f"the same for a {runs.small_rows:,}-row transaction",
            goals=(Goal("value", "<=", CEILING_MIB),),
            details={**details, "apply rows/s": runs.worker_rates},
        ),
        Figure(
            key="memory.relay",
            title=f"relay peak RSS publishing one {runs.rows:,}-row transaction",
            unit="MiB",
            values=runs.relay_mib,
            baseline=runs.relay_small_mib,
            baseline_title=f"the same for a {runs.small_rows:,}-row transaction",
            goals=(Goal("value", "<=", CEILING_MIB),),
            details=details,
        ),
    ]
