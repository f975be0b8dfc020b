"""What runs for a set, for ``set inspect``: the leading relay, the queue's backlog, the workers.

Read from where each fact lives: the relay's election node in ZooKeeper (its
lock's contenders, and the node version that is the epoch), PgQ's consumer
and queue info in the source, and the workers' ephemeral status nodes (see
``pgshovel.replication.status``). ``read_*`` do the I/O; ``*_lines`` are pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg2.extensions
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from pgshovel._numbers import rows_of_estimate
from pgshovel.cluster import names
from pgshovel.cluster.status import read_statuses
from pgshovel.relay.queue import read_backlog
from pgshovel.source import translating


@dataclass(frozen=True)
class RelayActivity:
    """The relay election of a set."""

    #: live contenders, the leader first (empty: no relay runs)
    contenders: tuple[str, ...] = ()
    #: the epoch of the last leader (the node's version), None if no relay ever ran
    epoch: int | None = None
    #: who led last (the node's data)
    last_leader: str = ""


@dataclass(frozen=True)
class QueueActivity:
    """The set's PgQ queue as the relay's consumer sees it."""

    #: events in ticks the relay has not finished yet (PgQ's count, by event numbers)
    pending_events: int
    #: events written after the last tick (not in any batch yet)
    untick_events: int
    #: seconds since the tick the relay finished last
    consumer_lag: float
    #: seconds since the relay last finished a batch
    last_seen: float
    #: committed events no finished batch holds (those of a batch being published, and of
    #: transactions in progress at the last finished tick, included); None: not counted
    unpublished: int | None = None
    #: an upper bound of the age of the oldest of them (seconds), None when there is none
    oldest_seconds: float | None = None


@dataclass(frozen=True)
class WorkerActivity:
    """One worker's status node."""

    name: str
    document: dict[str, Any] = field(default_factory=dict)


def read_relay(client: KazooClient, cluster: str, set_name: str) -> RelayActivity:
    path = names.relay_path(cluster, set_name)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return RelayActivity()
    contenders = tuple(str(item) for item in client.Lock(path).contenders())
    return RelayActivity(contenders, int(stat.version), data.decode("utf-8", "replace"))


def read_queue(conn: psycopg2.extensions.connection, queue: str) -> QueueActivity | None:
    """None when the queue or the relay's consumer registration is missing; the backlog is
    counted from the events (``pgshovel.relay.queue.read_backlog``)."""
    with translating(f"reading the state of queue {queue!r}"):
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT c.pending_events, extract(epoch FROM c.lag), "
                "extract(epoch FROM c.last_seen), q.ev_new "
                "FROM pgq.get_consumer_info(%s, %s) c, pgq.get_queue_info(%s) q",
                (queue, names.CONSUMER, queue),
            )
            row = cursor.fetchone()
            backlog = None if row is None else read_backlog(cursor, queue)
        conn.rollback()
    if row is None:
        return None
    pending, lag, seen, new = row
    return QueueActivity(
        int(pending or 0),
        int(new or 0),
        float(lag or 0),
        float(seen or 0),
        None if backlog is None else backlog.events,
        None if backlog is None else backlog.oldest_seconds,
    )


def read_workers(client: KazooClient, cluster: str, set_name: str) -> list[WorkerActivity]:
    return [
        WorkerActivity(name, document)
        for name, document in read_statuses(client, names.workers_path(cluster, set_name))
    ]


def relay_lines(relay: RelayActivity) -> list[str]:
    if relay.epoch is None:
        return ["relay: none has run yet"]
    if not relay.contenders:
        return [f"relay: none running (last leader {relay.last_leader}, epoch {relay.epoch})"]
    lines = [f"relay: {relay.contenders[0]} leads, epoch {relay.epoch}"]
    lines += [f"  standing by: {name}" for name in relay.contenders[1:]]
    return lines


def queue_lines(queue: QueueActivity | None) -> list[str]:
    if queue is None:
        return ["backlog: unknown (queue or consumer missing)"]
    seen = f"relay finished a batch {queue.last_seen:.1f}s ago"
    if queue.unpublished is None:
        waiting = queue.pending_events + queue.untick_events
        age = queue.consumer_lag
    else:
        waiting = queue.unpublished
        age = queue.oldest_seconds or 0.0
    if waiting == 0:
        return [f"backlog: 0 events ({seen})"]
    return [
        f"backlog: {waiting} event(s) not yet published, the oldest at most {age:.1f}s old ({seen})"
    ]


def worker_lines(workers: list[WorkerActivity], now: float) -> list[str]:
    if not workers:
        return ["workers: none running"]
    lines = ["workers:"]
    for worker in workers:
        doc = worker.document
        age = now - float(doc.get("updated", now))
        lines.append(
            f"  {worker.name}: {doc.get('copy') or doc.get('target', '?')}, "
            f"{doc.get('phase', '?')}, offset {doc.get('offset', '?')}, "
            f"lag {float(doc.get('lag_seconds', 0)):.1f}s "
            f"({doc.get('lag_messages', '?')} message(s)), updated {age:.0f}s ago"
        )
        applying = doc.get("applying")
        if isinstance(applying, dict):
            since = now - float(applying.get("since", now))
            lines.append(
                f"    applying {applying.get('mutations', '?')} mutation(s) of "
                f"{applying.get('batches', '?')} batch(es) from batch "
                f"{applying.get('batch', '?')}, for {since:.0f}s"
            )
        for task in doc.get("tasks", ()):
            progress = rows_of_estimate(int(task.get("rows", 0)), int(task.get("estimate", 0)))
            lines.append(f"    {task.get('purpose', '?')} of {task.get('table', '?')}: {progress}")
    return lines
