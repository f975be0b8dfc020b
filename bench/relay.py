"""Relay throughput and efficiency: a pre-filled queue to Kafka ÷ a raw confluent-kafka producer.

The relay runs with ``tick_interval: 0`` so the bench decides where batches
end: each relay run inserts ``relay_events`` orders (in transactions of
50,000 rows) while the relay idles, then ticks once, so one batch holds them
all, and waits for the queue to drain. The rate is events ÷ the seconds the
relay logged for that batch (take, read, frame, Kafka acks=all, finish). The
baseline produces the same messages' bytes (as many messages, of the sizes read
back from the relay's own messages on the topic) through a producer with the
relay's settings (``producer_settings``), flushing once at the end; its rate is
the run's events over the seconds that took, so the ratio is the raw producer's
time for the same bytes over the relay's (with the batched encoding a message
holds many events: counting the producer's messages instead would compare
messages with events). The
relay's CPU seconds and peak RSS are read from /proc around each run, and the
shares of its batch time spent reading rows, decoding and in Kafka from its
batch log lines (``details.time_split_reading_decoding_kafka``).
"""

from __future__ import annotations

import io
import logging
import pstats
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench import _proc, _relaylog, _schema, _stack
from bench._modes import Settings
from bench._report import Figure, Goal
from bench._stats import per_million, schedule
from pgshovel.relay.producer import producer_settings
from pgshovel.sandbox import SandboxConnection

logger = logging.getLogger(__name__)

SET = "relay"
DATABASE = "pgshovel_bench_relay"
FILL_CHUNK = 50_000
RAW_TOPIC = "bench.raw-producer"


@dataclass
class RelayRuns:
    """Raw results of the throughput runs."""

    relay_rates: list[float] = field(default_factory=list)
    producer_rates: list[float] = field(default_factory=list)
    cpu_per_million: list[float] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    mean_message_bytes: float = 0.0
    #: per run: shares of the relay's batch time reading rows, decoding, in Kafka
    time_split: list[list[float]] = field(default_factory=list)
    profile: list[str] = field(default_factory=list)


class RelayBench:
    """The relay-side fixture: its database, set, relay process and fill position."""

    def __init__(self, sandbox: SandboxConnection, workdir: Path) -> None:
        self.sandbox = sandbox
        self.workdir = workdir
        self.dsn = _stack.create_database(sandbox, DATABASE)
        _stack.execute(self.dsn, [_schema.ORDERS_DDL])
        _stack.create_set(sandbox, SET, self.dsn, [_schema.ORDERS])
        self.next_id = 1
        self.relay: _stack.RelayProcess | None = None

    def start_relay(
        self, log_name: str, command: tuple[str, ...] = (str(_stack.RELAY),)
    ) -> _stack.RelayProcess:
        config = _stack.write_relay_yml(
            self.workdir / "relay-throughput.yml", self.sandbox, tick_interval=0
        )
        self.relay = _stack.RelayProcess(
            self.sandbox, config, SET, self.workdir / log_name, command=command
        )
        # A first small batch: the relay leads, the topic exists, the producer is connected.
        self.fill(10)
        self.drain(timeout=90)
        return self.relay

    def fill(self, count: int) -> None:
        done = 0
        while done < count:
            size = min(FILL_CHUNK, count - done)
            _stack.execute(self.dsn, [_schema.insert_orders(self.next_id, size)])
            self.next_id += size
            done += size

    def drain(self, timeout: float) -> None:
        _stack.tick(self.dsn, SET)
        _stack.wait_for(
            lambda: _stack.queue_drained(self.dsn, SET),
            timeout,
            "the relay to drain the queue",
            self.relay,
        )

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.stop()
            self.relay = None


def relay_run(
    bench: RelayBench, events: int
) -> tuple[float, int, _proc.Usage, int, int, list[float]]:
    """One timed relay run: (events/s, events, usage delta, first offset, end offset, split).

    ``split``: the shares of the batch time spent reading rows, decoding and in Kafka,
    as the relay logged them.
    """
    relay = bench.relay
    if relay is None:
        raise RuntimeError("relay run asked for before the relay was started")
    kafka = bench.sandbox.kafka_config()
    topic = _stack.topic_of(SET)
    bench.fill(events)
    first = _stack.end_offset(kafka, topic)
    log_size = len(relay.log_text())
    _proc.reset_peak([relay.pid])
    before = _proc.usage([relay.pid])
    bench.drain(timeout=max(120.0, events / 1000))
    after = _proc.usage([relay.pid])
    end = _stack.end_offset(kafka, topic)
    lines = _relaylog.batch_lines(relay.log_text()[log_size:])
    done, seconds = _relaylog.throughput(lines)
    if done != events or seconds <= 0:
        raise RuntimeError(
            f"the relay logged {done!r} events in {seconds!r}s for a fill of {events!r}; "
            f"see {str(relay.log_path)!r}"
        )
    usage = _proc.Usage(after.cpu_seconds - before.cpu_seconds, after.peak_rss)
    split = [part / seconds for part in _relaylog.time_split(lines)]
    logger.info(
        "relay run: %.0f%% reading rows, %.0f%% decoding, %.0f%% kafka",
        *(100 * part for part in split),
    )
    return done / seconds, done, usage, first, end, split


def producer_run(kafka: dict[str, str], sizes: list[int]) -> float:
    """Seconds a raw producer with the relay's settings takes to send messages of ``sizes``,
    one flush at the end."""
    settings = producer_settings(kafka["bootstrap.servers"], kafka)
    producer = Producer(settings, logger=_stack.KAFKA_LOG)
    payloads = {size: b"x" * size for size in set(sizes)}
    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    producer.produce(RAW_TOPIC, b"warm-up", on_delivery=delivered)
    producer.flush(60)
    started = time.monotonic()
    produce = producer.produce
    for size in sizes:
        while True:
            try:
                produce(RAW_TOPIC, payloads[size], on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(300)
    seconds = time.monotonic() - started
    if remaining or failures:
        raise RuntimeError(
            f"raw producer: {remaining!r} messages undelivered, {len(failures)!r} failed "
            f"(first: {failures[:1]!r}); is the sandbox's Kafka healthy?"
        )
    return seconds


def profile_top(stats_file: Path, report: Path, lines: int = 25) -> list[str]:
    """The functions with the most own time, as text (also written to ``report``)."""
    text = io.StringIO()
    stats = pstats.Stats(str(stats_file), stream=text)
    stats.sort_stats("tottime").print_stats(lines)
    stats.sort_stats("cumulative").print_stats(lines)
    report.write_text(text.getvalue())
    table = text.getvalue().split("ncalls", 1)[-1].splitlines()[1 : lines + 1]
    return [" ".join(line.split()) for line in table if line.strip()]


def profiled_run(bench: RelayBench, events: int) -> list[str]:
    """One extra relay run under cProfile (not counted); its top functions."""
    bench.stop()
    stats_file = bench.workdir / "relay-profile.pstats"
    command = (sys.executable, "-m", "bench._profiled_relay", str(stats_file))
    bench.start_relay("relay-profiled.log", command=command)
    relay_run(bench, events)
    bench.stop()
    return profile_top(stats_file, bench.workdir / "relay-profile.txt")


def measure(
    sandbox: SandboxConnection, settings: Settings, workdir: Path, profile: bool = False
) -> RelayRuns:
    """Alternate relay and raw-producer runs; the relay's first run provides the sizes."""
    bench = RelayBench(sandbox, workdir)
    runs = RelayRuns()
    sizes: list[int] = []
    #: the events the relay's messages of ``sizes`` carried
    carried = 0
    kafka = sandbox.kafka_config()
    try:
        bench.start_relay("relay-throughput.log")
        variants = schedule(settings.rounds, ["relay", "producer"])
        for number, variant in variants:
            if variant == "producer" and not sizes:
                continue  # the first round runs the relay first, later ones reuse its sizes
            if variant == "relay":
                rate, events, usage, first, end, split = relay_run(bench, settings.relay_events)
                runs.time_split.append([round(part, 3) for part in split])
                runs.relay_rates.append(rate)
                runs.events.append(events)
                runs.cpu_per_million.append(per_million(usage.cpu_seconds, events) or 0.0)
                runs.peak_rss_mb.append(usage.peak_rss / (1 << 20))
                if not sizes:
                    sizes = _stack.message_sizes(kafka, _stack.topic_of(SET), first, end)
                    runs.mean_message_bytes = sum(sizes) / len(sizes)
                    carried = events
                logger.info("relay round %d: %.0f events/s", number + 1, rate)
            else:
                runs.producer_rates.append(carried / producer_run(kafka, sizes))
                logger.info(
                    "raw producer round %d: the same bytes at %.0f events/s",
                    number + 1,
                    runs.producer_rates[-1],
                )
        if profile:
            runs.profile = profiled_run(bench, settings.relay_events)
    finally:
        bench.stop()
    return runs


def figures(runs: RelayRuns, settings: Settings) -> list[Figure]:
    details = {
        "events_per_run": settings.relay_events,
        "messages_per_run_include_begin_commit": True,
        "baseline_sends_the_relays_messages_bytes": True,
        "mean_message_bytes": round(runs.mean_message_bytes, 1),
        "time_split_reading_decoding_kafka": runs.time_split,
        "profile_tottime_top": runs.profile,
    }
    return [
        Figure(
            key="relay.throughput",
            title="relay throughput, pre-filled queue to Kafka acks=all (events/s)",
            unit="/s",
            values=runs.relay_rates,
            baseline=runs.producer_rates,
            baseline_title="raw confluent-kafka producer, the same messages' bytes",
            goals=(Goal("value", ">=", 150_000), Goal("ratio", ">=", 0.3)),
            details=details,
        ),
        Figure(
            key="relay.cpu",
            title="relay CPU seconds per million events",
            unit="s",
            values=runs.cpu_per_million,
            details={"events": runs.events},
        ),
        Figure(
            key="relay.rss",
            title="relay peak RSS during a run",
            unit="MiB",
            values=runs.peak_rss_mb,
            details={"events": runs.events},
        ),
    ]
