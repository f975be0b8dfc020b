"""Helpers for relay tests: run pgshovel-relay as a process, read and validate its topic."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg2
import yaml
from confluent_kafka import Consumer, TopicPartition
from psycopg2 import sql

from pgshovel.cluster import names
from pgshovel.protocol import stream_pb2
from pgshovel.sandbox import ChildProcess, SandboxConnection
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.validation import StreamValidator
from tests.integration.capture._capture import SET, install

RELAY = Path(sys.executable).with_name("pgshovel-relay")


def write_relay_yml(directory: Path, sandbox: SandboxConnection, **settings: Any) -> Path:
    document: dict[str, Any] = {
        "writer": {
            "path": "pgshovel.relay.kafka:KafkaWriter",
            "configuration": {
                "bootstrap_servers": sandbox.kafka_bootstrap_servers,
                "properties": dict(sandbox.kafka_properties),
                "flush_timeout": settings.pop("flush_timeout", 60.0),
            },
        },
        "tick_interval": 0.05,
        "poll_interval": 0.02,
        **settings,
    }
    path = directory / "relay.yml"
    path.write_text(yaml.safe_dump(document))
    return path


class RelayProcess(ChildProcess):
    """One ``pgshovel-relay`` child process in its own session, always stopped by its PID."""

    def __init__(
        self, sandbox: SandboxConnection, cluster: str, config: Path, log: Path, set_name: str = SET
    ) -> None:
        environment = dict(
            os.environ,
            PGSHOVEL_CLUSTER=cluster,
            PGSHOVEL_ZOOKEEPER_HOSTS=sandbox.zookeeper_hosts,
        )
        super().__init__(
            "pgshovel-relay", [str(RELAY), str(config), set_name], log, env=environment
        )

    def alive(self) -> bool:
        return self.running()


def topic_of(cluster: str) -> str:
    return names.topic_name(cluster, SET)


def read_topic(
    kafka_config: dict[str, str], topic: str, start: int = 0, limit: float = 60
) -> list[tuple[int, stream_pb2.Message]]:
    """Every message from ``start`` up to the topic's end offset when called."""
    consumer = Consumer(
        {**kafka_config, "group.id": "pgshovel-test", "enable.auto.commit": "false"}
    )
    messages: list[tuple[int, stream_pb2.Message]] = []
    try:
        partition = TopicPartition(topic, 0)
        _low, high = consumer.get_watermark_offsets(partition, timeout=30, cached=False)
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + limit
        while (not messages or messages[-1][0] < high - 1) and high > start:
            if time.monotonic() > deadline:
                raise AssertionError(f"read {len(messages)} messages of {topic!r}, not to {high}")
            record = consumer.poll(0.5)
            if record is None or record.error() is not None:
                continue
            offset, value = record.offset(), record.value()
            assert offset is not None and value is not None
            messages.append((offset, stream_pb2.Message.FromString(value)))
    finally:
        consumer.close()
    return messages


def validated(messages: Sequence[tuple[int, stream_pb2.Message]]) -> list[CommittedBatch]:
    return list(StreamValidator().validate(messages))


def wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, log: Callable[[], str] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    detail = f"\n--- log ---\n{log()}" if log is not None else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{detail}")


def queue_drained(dsn: str, cluster: str, set_name: str = SET) -> bool:
    """True when the relay has finished a batch that ends after every event inserted so far,
    and no event committed after that batch's end tick was taken (a transaction open at the
    tick: its events have sequence numbers before the tick's, yet no batch holds them)."""
    connection = psycopg2.connect(dsn)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT s.sub_batch IS NULL"
                "   AND t.tick_event_seq >= pgq.seq_getval(q.queue_event_seq),"
                " t.tick_snapshot::text, q.queue_data_pfx"
                " FROM pgq.queue q"
                " JOIN pgq.subscription s ON s.sub_queue = q.queue_id"
                " JOIN pgq.consumer c ON c.co_id = s.sub_consumer AND c.co_name = 'pgshovel'"
                " JOIN pgq.tick t ON t.tick_queue = q.queue_id AND t.tick_id = s.sub_last_tick"
                " WHERE q.queue_name = %s",
                (names.queue_name(cluster, set_name),),
            )
            row = cursor.fetchone()
            if row is None or not row[0]:
                return False
            _finished, snapshot, events = row
            cursor.execute(
                sql.SQL(
                    "SELECT NOT EXISTS (SELECT 1 FROM {} e"
                    " WHERE e.ev_txid >= txid_snapshot_xmin(%s::txid_snapshot)"
                    " AND NOT txid_visible_in_snapshot(e.ev_txid, %s::txid_snapshot))"
                ).format(sql.Identifier(*events.split(".", 1))),
                (snapshot, snapshot),
            )
            late = cursor.fetchone()
    finally:
        connection.close()
    return late is not None and bool(late[0])


def replay(batches: Sequence[CommittedBatch]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The table state the stream describes: key -> row of Python values (int/str/None)."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for batch in batches:
        for mutation in batch.mutations:
            if mutation.operation == stream_pb2.Mutation.TRUNCATE:
                state.clear()
                continue
            keys = list(mutation.key_columns)
            if mutation.HasField("old"):
                old = simple(mutation.old)
                state.pop(tuple(old[k] for k in keys), None)
            if mutation.HasField("new"):
                new = simple(mutation.new)
                state[tuple(new[k] for k in keys)] = new
    return state


def simple(row: stream_pb2.Row) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for column in row.columns:
        kind = column.value.WhichOneof("kind")
        values[column.name] = None if kind == "null" else getattr(column.value, kind)
    return values


__all__ = ["install"]


def terminate(dsn: str, application_name: str) -> int:
    """Terminate every backend of ``application_name`` (prefix match) on the server."""
    connection = psycopg2.connect(dsn)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name LIKE %s",
                (application_name + "%",),
            )
            row = cursor.fetchone()
    finally:
        connection.close()
    return int(row[0]) if row else 0
