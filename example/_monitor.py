"""Read-only probes of the running pipeline: the topic's end, the worker's state, the relay's queue.

* Topic end: the high watermark of partition 0 of the set's topic (``None``
  while the relay has not created the topic).
* Worker: its state in the target's ``pgshovel_replication.worker_state``, read
  as the worker reads it; the offset it reads next is its position's.
* Queue: PgQ events not yet published, ticked (``pending_events``, a batch
  in progress) or not (``ev_new``).
* Copy: the worker's status node in ZooKeeper (what ``pgshovel-admin serve``
  shows: mutations applied per second, lag), and the rows of each of the
  target's tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg2
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kazoo.exceptions import KazooException
from psycopg2 import sql

from pgshovel.cluster.names import queue_name, workers_path
from pgshovel.cluster.status import read_statuses
from pgshovel.cluster.zookeeper import start_client
from pgshovel.relay.queue import CONSUMER
from pgshovel.replication.targets import _pgstate


class PipelineProbe:
    """Holds one Kafka consumer and two database connections; close it when done."""

    def __init__(
        self,
        kafka_config: Mapping[str, str],
        topic: str,
        source_dsn: str,
        target_dsn: str,
        cluster: str,
        set_name: str,
        zookeeper_hosts: str,
    ) -> None:
        self.topic = topic
        self.cluster = cluster
        self.set_name = set_name
        self.queue = queue_name(cluster, set_name)
        # log_level 0: a 0.9 broker answers metadata for a missing topic in a way
        # librdkafka logs as a protocol error; the probe only needs the offsets.
        self._consumer = Consumer(
            {
                **kafka_config,
                "group.id": f"pgshovel-demo-probe-{topic}",
                "enable.auto.commit": "false",
                "log_level": 0,
            }
        )
        self._source = psycopg2.connect(source_dsn, application_name="pgshovel-demo probe")
        self._target = psycopg2.connect(target_dsn, application_name="pgshovel-demo probe")
        self._source.autocommit = self._target.autocommit = True
        self._zookeeper = start_client(zookeeper_hosts)

    def topic_end(self) -> int | None:
        try:
            _low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=5.0, cached=False
            )
        except KafkaException:
            return None
        return int(high) if high >= 0 else None

    def worker(self) -> tuple[str | None, int | None]:
        """``(phase, next offset)``; ``(None, None)`` before the worker wrote its state."""
        with self._target.cursor() as cursor:
            cursor.execute("SELECT to_regclass('pgshovel_replication.worker_state') IS NOT NULL")
            row = cursor.fetchone()
            if row is None or not row[0]:
                return None, None
            state = _pgstate.read(cursor, self.cluster, self.set_name)
        if state is None:
            return None, None
        if state.phase != "streaming":
            return state.phase, None
        return state.phase, state.position.messages

    def queue_pending(self) -> int:
        """Events in the set's queue the relay has not finished (ticked or not)."""
        with self._source.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(sum(c.pending_events), 0)"
                " + count(c.current_batch) + max(q.ev_new)"
                " FROM pgq.get_queue_info(%s) q"
                " LEFT JOIN pgq.get_consumer_info(%s, %s) c ON true",
                (self.queue, self.queue, CONSUMER),
            )
            row = cursor.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def copy_status(self) -> dict[str, Any] | None:
        """The worker's status document, None while no worker writes one."""
        try:
            statuses = read_statuses(self._zookeeper, workers_path(self.cluster, self.set_name))
        except KazooException:
            return None
        return statuses[0][1] if statuses else None

    def table_rows(self, tables: Sequence[tuple[str, str]]) -> list[tuple[str, int | None]]:
        """``(name, rows)`` of each target table, None for one not created yet."""
        counts: list[tuple[str, int | None]] = []
        with self._target.cursor() as cursor:
            for schema, name in tables:
                cursor.execute(
                    "SELECT to_regclass(%s) IS NOT NULL",
                    (sql.Identifier(schema, name).as_string(cursor),),
                )
                row = cursor.fetchone()
                if row is None or not row[0]:
                    counts.append((name, None))
                    continue
                cursor.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
                )
                counted = cursor.fetchone()
                counts.append((name, int(counted[0]) if counted else None))
        return counts

    def close(self) -> None:
        self._consumer.close()
        self._source.close()
        self._target.close()
        self._zookeeper.stop()
        self._zookeeper.close()
