"""set inspect's activity lines: relay leader and epoch, backlog, workers (pure)."""

from __future__ import annotations

from pgshovel.inspection.activity import (
    QueueActivity,
    RelayActivity,
    WorkerActivity,
    queue_lines,
    relay_lines,
    worker_lines,
)


def test_relay_lines() -> None:
    assert relay_lines(RelayActivity()) == ["relay: none has run yet"]
    assert relay_lines(RelayActivity((), 4, "h:1:a")) == [
        "relay: none running (last leader h:1:a, epoch 4)"
    ]
    assert relay_lines(RelayActivity(("h:1:a", "h:2:b"), 4, "h:1:a")) == [
        "relay: h:1:a leads, epoch 4",
        "  standing by: h:2:b",
    ]


def test_queue_lines() -> None:
    assert queue_lines(None) == ["backlog: unknown (queue or consumer missing)"]
    assert queue_lines(QueueActivity(0, 0, 50.0, 2.0)) == [
        "backlog: 0 events (relay finished a batch 2.0s ago)"
    ]
    assert queue_lines(QueueActivity(10, 5, 21.5, 21.5)) == [
        "backlog: 15 event(s) not yet published, the oldest at most 21.5s old "
        "(relay finished a batch 21.5s ago)"
    ]
    # counted from the events: PgQ's count by event numbers says 0 during a long transaction
    assert queue_lines(QueueActivity(0, 0, 30.0, 30.0, 80_000, 12.25)) == [
        "backlog: 80000 event(s) not yet published, the oldest at most 12.2s old "
        "(relay finished a batch 30.0s ago)"
    ]
    assert queue_lines(QueueActivity(3, 0, 30.0, 0.5, 0, None)) == [
        "backlog: 0 events (relay finished a batch 0.5s ago)"
    ]


def test_worker_lines() -> None:
    assert worker_lines([], 0.0) == ["workers: none running"]
    document = {
        "target": "PostgresTarget",
        "phase": "streaming",
        "offset": 41,
        "lag_seconds": 0.25,
        "lag_messages": 3,
        "updated": 95.0,
        "tasks": [{"table": "public.big", "purpose": "backfill", "rows": 5, "estimate": 9}],
    }
    assert worker_lines([WorkerActivity("h:9:c", document)], 100.0) == [
        "workers:",
        "  h:9:c: PostgresTarget, streaming, offset 41, lag 0.2s (3 message(s)), updated 5s ago",
        "    backfill of public.big: 5/~9 rows",
    ]


def test_worker_lines_name_the_copy_and_what_it_applies() -> None:
    document = {
        "target": "PostgresTarget",
        "copy": "postgresql:db.example:5432/copy",
        "phase": "streaming",
        "offset": 41,
        "lag_seconds": 65.0,
        "lag_messages": 0,
        "updated": 99.6,
        "applying": {"batch": 17, "batches": 1, "mutations": 80000, "since": 38.0},
        "tasks": [{"table": "public.big", "purpose": "backfill", "rows": 3698, "estimate": 2052}],
    }
    assert worker_lines([WorkerActivity("h:9:c", document)], 100.0) == [
        "workers:",
        "  h:9:c: postgresql:db.example:5432/copy, streaming, offset 41, lag 65.0s "
        "(0 message(s)), updated 0s ago",
        "    applying 80000 mutation(s) of 1 batch(es) from batch 17, for 62s",
        "    backfill of public.big: 3698 rows (~2052 estimated)",
    ]
