"""Latency from commit to message on Kafka at a fixed offered load, with the default tick interval.

A writer thread commits one INSERT per transaction at ``latency_rate``
transactions per second (paced against a fixed schedule, so a slow commit is
caught up rather than lowering the load); each row carries the client's
wall clock in microseconds taken just before the statement. The main thread
consumes the set's topic (``fetch.wait.max.ms`` 5, so the consumer adds
little) and records receive time minus that value for every mutation. The first
``latency_warmup`` seconds of each round are not counted; each round reports
its p50, p95 and p99, and the figures are the medians over the rounds.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
from confluent_kafka import Consumer, TopicPartition
from psycopg2 import sql

from bench import _schema, _stack
from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import percentile
from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import SandboxConnection
from pgshovel.stream.rows import mutations_in

logger = logging.getLogger(__name__)

SET = "latency"
DATABASE = "pgshovel_bench_latency"
FRACTIONS = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


@dataclass
class LatencyRuns:
    percentiles: dict[str, list[float]] = field(
        default_factory=lambda: {name: [] for name in FRACTIONS}
    )
    offered_rates: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)


def now_us() -> int:
    return time.time_ns() // 1000


class PacedWriter(threading.Thread):
    """Commits ``rate`` single-row transactions per second for ``seconds`` seconds."""

    def __init__(self, dsn: str, rate: int, seconds: float) -> None:
        super().__init__(name="bench-latency-writer", daemon=True)
        self.dsn = dsn
        self.rate = rate
        self.seconds = seconds
        self.sent = 0
        self.elapsed = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = psycopg2.connect(self.dsn)
            conn.autocommit = True
            statement = sql.SQL("INSERT INTO {} (sent_us, payload) VALUES (%s, %s)").format(
                sql.Identifier("public", _schema.LATENCY)
            )
            try:
                with conn.cursor() as cursor:
                    total = int(self.rate * self.seconds)
                    started = time.monotonic()
                    for number in range(total):
                        delay = started + number / self.rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                        cursor.execute(statement, (now_us(), "probe"))
                        self.sent += 1
                    self.elapsed = time.monotonic() - started
            finally:
                conn.close()
        except BaseException as error:
            self.error = error


def _sent_us(mutation: stream_pb2.Mutation) -> int | None:
    for column in mutation.new.columns:
        if column.name == "sent_us":
            return int(column.value.int64)
    return None


def one_round(
    dsn: str, kafka: dict[str, str], settings: Settings, set_name: str = SET
) -> tuple[list[float], float]:
    """Latencies (ms) of one round after its warm-up, and the offered rate achieved."""
    topic = _stack.topic_of(set_name)
    consumer = Consumer(
        {
            **kafka,
            "group.id": "pgshovel-bench-latency",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
        },
        logger=_stack.KAFKA_LOG,
    )
    latencies: list[float] = []
    writer = PacedWriter(
        dsn, settings.latency_rate, settings.latency_warmup + settings.latency_seconds
    )
    try:
        consumer.assign([TopicPartition(topic, 0, _stack.end_offset(kafka, topic))])
        counted_from = now_us() + int(settings.latency_warmup * 1_000_000)
        received = 0
        writer.start()
        deadline: float | None = None
        while deadline is None or time.monotonic() < deadline:
            records = consumer.consume(num_messages=1000, timeout=0.05)
            arrived = now_us()
            for record in records:
                if record.error() is not None:
                    continue
                message = stream_pb2.Message.FromString(record.value() or b"")
                for mutation in mutations_in(message):
                    sent = _sent_us(mutation)
                    received += 1
                    if sent is not None and sent >= counted_from:
                        latencies.append((arrived - sent) / 1000.0)
            if deadline is None and not writer.is_alive():
                deadline = time.monotonic() + 5.0
            if deadline is not None and received >= writer.sent:
                break
    finally:
        writer.join(60)
        consumer.close()
    if writer.error is not None:
        raise RuntimeError(f"the paced writer failed: {writer.error}") from writer.error
    if received < writer.sent:
        raise RuntimeError(
            f"only {received!r} of {writer.sent!r} probe rows reached Kafka within 5s of the "
            "last commit; see the relay log in the bench state directory"
        )
    return latencies, writer.sent / writer.elapsed if writer.elapsed > 0 else 0.0


def measure(sandbox: SandboxConnection, settings: Settings, workdir: Path) -> LatencyRuns:
    dsn = _stack.create_database(sandbox, DATABASE)
    _stack.execute(dsn, [_schema.LATENCY_DDL])
    _stack.create_set(sandbox, SET, dsn, [_schema.LATENCY])
    # The relay's defaults (tick interval, poll interval): what a user gets.
    config = _stack.write_relay_yml(workdir / "relay-latency.yml", sandbox)
    relay = _stack.RelayProcess(sandbox, config, SET, workdir / "relay-latency.log")
    runs = LatencyRuns()
    try:
        _stack.execute(
            dsn,
            [
                sql.SQL("INSERT INTO {} (sent_us) VALUES (0)").format(
                    sql.Identifier("public", _schema.LATENCY)
                )
            ],
        )
        _stack.wait_for(lambda: _stack.queue_drained(dsn, SET), 90, "the latency relay", relay)
        for number in range(settings.rounds):
            latencies, rate = one_round(dsn, sandbox.kafka_config(), settings)
            for name, fraction in FRACTIONS.items():
                runs.percentiles[name].append(percentile(latencies, fraction) or 0.0)
            runs.offered_rates.append(rate)
            runs.samples.append(len(latencies))
            logger.info(
                "latency round %d: p50 %.1f ms, p99 %.1f ms at %.0f tx/s",
                number + 1,
                runs.percentiles["p50"][-1],
                runs.percentiles["p99"][-1],
                rate,
            )
    finally:
        relay.stop()
    return runs


def figures(runs: LatencyRuns, settings: Settings) -> list[Figure]:
    details = {
        "offered_rate": settings.latency_rate,
        "achieved_rates": [round(rate, 1) for rate in runs.offered_rates],
        "samples": runs.samples,
        "seconds_per_round": settings.latency_seconds,
    }
    return [
        Figure(
            key=f"latency.{name}",
            title=f"latency commit → Kafka, {name} at {settings.latency_rate} tx/s",
            unit="ms",
            values=runs.percentiles[name],
            goals=(Goal("value", "<=", 150.0),) if name == "p99" else (),
            details=details,
        )
        for name in FRACTIONS
    ]
