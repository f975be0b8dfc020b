"""set inspect's activity lines: relay leader and epoch, backlog, workers (pure)."""

from __future__ import annotations

from pgshovel.admin.activity import (
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
