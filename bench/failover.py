"""The latency cost of failover-safe publishing: commit → Kafka with and without ``standbys:``.

A primary of its own and a streaming standby of it (``pgshovel.sandbox.start_server``;
default durability, unlike the sandbox's server) run the latency bench's probe:
the paced writer at ``latency_rate`` tx/s and a consumer timing each mutation
(``latency.one_round``). Rounds alternate between a relay publishing at once
and one that waits, for each batch, until the standby replayed the WAL written
up to the moment the batch was taken (``pgshovel.relay.failover.StandbyGate``).
The figures are the medians over rounds of each round's p50 and p99, the
baseline the same without the wait.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from psycopg2 import sql

from bench import _schema, _stack, latency
from bench._modes import Settings
from bench._report import Figure
from bench._stats import percentile, schedule
from pgshovel.sandbox import SandboxConnection, start_server, stop_server

logger = logging.getLogger(__name__)

SET = f"failover_{os.getpid()}"
FRACTIONS = {"p50": 0.50, "p99": 0.99}


@dataclass
class FailoverRuns:
    safe: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in FRACTIONS})
    plain: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in FRACTIONS})


def measure(sandbox: SandboxConnection, settings: Settings, workdir: Path) -> FailoverRuns:
    state_dir = Path(sandbox.state_dir)
    runs = FailoverRuns()
    primary = start_server(state_dir, "bench-primary")
    try:
        standby = start_server(state_dir, "bench-standby", primary_port=primary.port)
        try:
            dsn = primary.dsn()
            _stack.execute(dsn, [_schema.LATENCY_DDL])
            _stack.create_set(sandbox, SET, dsn, [_schema.LATENCY])
            probe = sql.SQL("INSERT INTO {} (sent_us) VALUES (0)").format(
                sql.Identifier("public", _schema.LATENCY)
            )
            for number, variant in schedule(settings.rounds, ["safe", "plain"]):
                standbys = [standby.name] if variant == "safe" else []
                config = _stack.write_relay_yml(
                    workdir / f"relay-failover-{variant}.yml", sandbox, standbys=standbys
                )
                relay = _stack.RelayProcess(
                    sandbox, config, SET, workdir / f"relay-failover-{variant}.log"
                )
                try:
                    _stack.execute(dsn, [probe])
                    _stack.wait_for(
                        lambda: _stack.queue_drained(dsn, SET), 90, "the failover relay", relay
                    )
                    latencies, _rate = latency.one_round(dsn, sandbox.kafka_config(), settings, SET)
                finally:
                    relay.stop()
                target = runs.safe if variant == "safe" else runs.plain
                for name, fraction in FRACTIONS.items():
                    target[name].append(percentile(latencies, fraction) or 0.0)
                logger.info(
                    "failover round %d %s: p50 %.1f ms, p99 %.1f ms",
                    number + 1,
                    variant,
                    target["p50"][-1],
                    target["p99"][-1],
                )
        finally:
            stop_server(state_dir, "bench-standby")
    finally:
        stop_server(state_dir, "bench-primary")
    return runs


def figures(runs: FailoverRuns, settings: Settings) -> list[Figure]:
    details = {"offered_rate": settings.latency_rate, "seconds_per_round": settings.latency_seconds}
    return [
        Figure(
            key=f"latency.failover_safe.{name}",
            title=f"latency commit → Kafka with failover-safe publishing (1 standby), {name}",
            unit="ms",
            values=runs.safe[name],
            baseline=runs.plain[name],
            baseline_title="the same relay publishing at once",
            details=details,
        )
        for name in FRACTIONS
    ]
