"""How big each benchmark runs: ``full`` for real numbers, ``quick`` to keep them working in CI.

Both modes run the same code with at least three alternating rounds; quick
mode only shrinks data sizes and run lengths so the whole suite, sandbox
included, stays under three minutes. ``smoke`` is for the bench's own test:
one round of tiny sizes, every figure still measured (its numbers mean
nothing). ``durable_seconds`` is the length of the
capture group's pgbench runs with durable commits (shorter than the others in
full mode, which keeps that group under 25 minutes).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """Sizes and durations of one benchmark run."""

    mode: str
    rounds: int
    pgbench_scale: int
    pgbench_clients: int
    pgbench_seconds: int
    durable_seconds: int
    relay_events: int
    latency_rate: int
    latency_warmup: float
    latency_seconds: float
    snapshot_rows: int
    apply_mutations: int
    #: rows of the one source transaction of the memory group
    memory_rows: int
    #: rows of the table the table_snapshot group snapshots into a table topic
    table_snapshot_rows: int
    #: rows of the table the table_formats group applies to (and 100 times as many)
    tf_rows: int = 10_000
    #: mutations per micro-batch of the table_formats stream
    tf_changes: int = 3_000
    #: micro-batches per table_formats run (the figure is their median)
    tf_batches: int = 8
    #: alternating rounds of the table_formats variants
    tf_rounds: int = 3
    #: seconds of each table format's stream with maintenance on
    tf_upkeep_seconds: float = 600.0
    #: max_small_files of that stream's targets
    tf_max_small_files: int = 16


MODES: dict[str, Settings] = {
    "full": Settings(
        mode="full",
        rounds=3,
        pgbench_scale=10,
        pgbench_clients=4,
        pgbench_seconds=20,
        durable_seconds=10,
        relay_events=200_000,
        latency_rate=1000,
        latency_warmup=5,
        latency_seconds=30,
        snapshot_rows=1_000_000,
        apply_mutations=200_000,
        memory_rows=1_000_000,
        table_snapshot_rows=1_000_000,
    ),
    "quick": Settings(
        mode="quick",
        rounds=3,
        pgbench_scale=1,
        pgbench_clients=4,
        pgbench_seconds=1,
        durable_seconds=1,
        relay_events=20_000,
        latency_rate=1000,
        latency_warmup=1,
        latency_seconds=3,
        snapshot_rows=50_000,
        apply_mutations=10_000,
        memory_rows=30_000,
        table_snapshot_rows=30_000,
        tf_rows=2_000,
        tf_changes=300,
        tf_batches=5,
        tf_rounds=1,
        tf_upkeep_seconds=10.0,
        tf_max_small_files=4,
    ),
    "smoke": Settings(
        mode="smoke",
        rounds=1,
        pgbench_scale=1,
        pgbench_clients=2,
        pgbench_seconds=1,
        durable_seconds=1,
        # enough for the relay's CPU time to reach the kernel's 10 ms accounting tick
        # (about 2.5 us per event: 2,000 events could read as 0 s)
        relay_events=20_000,
        latency_rate=200,
        latency_warmup=0.5,
        latency_seconds=1,
        snapshot_rows=2_000,
        apply_mutations=2_000,
        memory_rows=2_000,
        table_snapshot_rows=2_000,
        tf_rows=200,
        tf_changes=60,
        tf_batches=3,
        tf_rounds=1,
        tf_upkeep_seconds=3.0,
        tf_max_small_files=4,
    ),
}


def settings(mode: str) -> Settings:
    """The settings of ``mode``; an unknown mode names the known ones."""
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(
            f"unknown benchmark mode {mode!r}; use one of {sorted(MODES)!r} "
            "(e.g. make bench BENCH=quick)"
        ) from None
