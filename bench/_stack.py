"""The running pieces the benchmarks drive: databases, sets, relay processes, topic offsets.

Everything here talks to the bench's own sandbox. Sets are created through the
same planning and two-phase code as ``pgshovel-admin set create``; relays run
as real ``pgshovel-relay`` processes (logs in the bench's state directory),
always stopped by their PID.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg2
import yaml
from confluent_kafka import Consumer, TopicPartition
from psycopg2 import sql
from psycopg2.extensions import connection, make_dsn

from pgshovel.admin import planning, twophase
from pgshovel.admin.connections import Connections
from pgshovel.cluster import names
from pgshovel.cluster.sets import parse_set_document
from pgshovel.cluster.zookeeper import ClusterStore, connect
from pgshovel.errors import SandboxError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.sandbox import ChildProcess, SandboxConnection, create_topic
from pgshovel.stream.rows import mutations_in

CLUSTER = "bench"
RELAY = Path(sys.executable).with_name("pgshovel-relay")
ROOT = Path(__file__).resolve().parents[1]
#: librdkafka's own messages (e.g. warnings about the 0.9 broker's properties) go here.
KAFKA_LOG = logging.getLogger("bench.kafka")


def connect_autocommit(dsn: str) -> connection:
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


def execute(dsn: str, statements: Sequence[sql.Composable | str]) -> None:
    """Run statements in autocommit mode on a short-lived connection."""
    conn = connect_autocommit(dsn)
    try:
        with conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
    finally:
        conn.close()


def fetch_value(dsn: str, query: sql.Composable | str) -> Any:
    conn = connect_autocommit(dsn)
    try:
        with conn.cursor() as cursor:
            cursor.execute(query)
            row = cursor.fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


def create_database(sandbox: SandboxConnection, name: str) -> str:
    """A fresh, empty database on the sandbox server (dropped first if left over); its DSN."""
    execute(
        sandbox.postgres_dsn,
        [
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)),
            sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)),
        ],
    )
    return str(make_dsn(sandbox.postgres_dsn, dbname=name))


def initialize_cluster(sandbox: SandboxConnection) -> None:
    """``pgshovel-admin cluster initialize`` for the bench cluster."""
    with connect(sandbox.zookeeper_hosts) as client, Connections() as connections:
        store = ClusterStore(client, CLUSTER)
        if store.cluster_exists():
            return
        context = planning.Context(CLUSTER, store, connections)
        twophase.execute(planning.plan_cluster_initialize(context), connections, client)


def create_set(sandbox: SandboxConnection, set_name: str, dsn: str, tables: Sequence[str]) -> None:
    """``pgshovel-admin set create`` of ``tables`` (in schema public) of database ``dsn``.

    A set of that name left by an earlier run on a reused sandbox is dropped first.
    """
    document = {"database": {"dsn": dsn}, "tables": [{"name": table} for table in tables]}
    configuration = parse_set_document(document, f"bench set {set_name!r}")
    with connect(sandbox.zookeeper_hosts) as client, Connections() as connections:
        store = ClusterStore(client, CLUSTER)
        context = planning.Context(CLUSTER, store, connections)
        if client.exists(names.set_path(CLUSTER, set_name)):
            twophase.execute(planning.plan_set_drop(context, set_name), connections, client)
        plan = planning.plan_set_create(context, set_name, configuration)
        twophase.execute(plan, connections, client)


def set_configuration(
    dsn: str, tables: Sequence[str]
) -> configuration_pb2.ReplicationSetConfiguration:
    """A set's configuration as the worker reads it: ``tables`` of schema public in ``dsn``."""
    configuration = configuration_pb2.ReplicationSetConfiguration()
    configuration.database.dsn = dsn
    for table in tables:
        configuration.tables.add(schema="public", name=table)
    return configuration


def topic_of(set_name: str) -> str:
    return f"{CLUSTER}.{set_name}"


def queue_of(set_name: str) -> str:
    return names.queue_name(CLUSTER, set_name)


def write_relay_yml(
    path: Path, sandbox: SandboxConnection, partitions: int = 1, **settings: Any
) -> Path:
    """A relay.yml for the sandbox's Kafka writing ``partitions`` partitions of the set
    topic; ``settings`` override the relay's defaults."""
    writer: dict[str, Any] = {
        "bootstrap_servers": sandbox.kafka_bootstrap_servers,
        "properties": dict(sandbox.kafka_properties),
    }
    if partitions != 1:
        writer["partitions"] = partitions
    document = {
        "writer": {"path": "pgshovel.relay.kafka:KafkaWriter", "configuration": writer},
        **settings,
    }
    path.write_text(yaml.safe_dump(document))
    return path


class RelayProcess(ChildProcess):
    """One ``pgshovel-relay`` process for one set, in its own session; its log is kept."""

    def __init__(
        self,
        sandbox: SandboxConnection,
        config: Path,
        set_name: str,
        log: Path,
        command: Sequence[str] = (str(RELAY),),
    ) -> None:
        environment = dict(
            os.environ, PGSHOVEL_CLUSTER=CLUSTER, PGSHOVEL_ZOOKEEPER_HOSTS=sandbox.zookeeper_hosts
        )
        super().__init__(
            "pgshovel-relay", [*command, str(config), set_name], log, env=environment, cwd=ROOT
        )

    def alive(self) -> bool:
        return self.running()

    def log_text(self) -> str:
        return self.output()


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    relay: RelayProcess | None = None,
) -> None:
    """Poll ``predicate`` until true; a RuntimeError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if relay is not None and not relay.alive():
            raise RuntimeError(
                f"the relay exited ({relay.process.returncode!r}) while waiting for {what}; "
                f"its log ends with: {relay.log_text()[-2000:]}"
            )
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}; see the bench logs")


def queue_drained(dsn: str, set_name: str) -> bool:
    """True when the relay finished a batch that ends after every event inserted so far."""
    value = fetch_value(
        dsn,
        sql.SQL(
            "SELECT s.sub_batch IS NULL AND t.tick_event_seq >= pgq.seq_getval(q.queue_event_seq)"
            " FROM pgq.queue q"
            " JOIN pgq.subscription s ON s.sub_queue = q.queue_id"
            " JOIN pgq.consumer c ON c.co_id = s.sub_consumer AND c.co_name = {}"
            " JOIN pgq.tick t ON t.tick_queue = q.queue_id AND t.tick_id = s.sub_last_tick"
            " WHERE q.queue_name = {}"
        ).format(sql.Literal(names.CONSUMER), sql.Literal(queue_of(set_name))),
    )
    return bool(value)


def tick(dsn: str, set_name: str) -> None:
    """Make the next tick cover every event inserted so far (as pgqd would, at once)."""
    queue = sql.Literal(queue_of(set_name))
    execute(
        dsn,
        [
            sql.SQL("SELECT pgq.force_tick({})").format(queue),
            sql.SQL("SELECT pgq.ticker({})").format(queue),
        ],
    )


def create_partitioned_topic(sandbox: SandboxConnection, topic: str, partitions: int) -> None:
    """Create ``topic`` with ``partitions`` partitions before anything asks the broker about
    it (a 0.9 broker creates a topic asked about with one); a topic a reused sandbox already
    holds is kept if it has that many."""
    try:
        create_topic(sandbox, topic, partitions)
    except SandboxError:
        consumer = Consumer({**sandbox.kafka_config(), "group.id": "pgshovel-bench"})
        try:
            found = consumer.list_topics(topic, timeout=10).topics.get(topic)
        finally:
            consumer.close()
        if found is None or len(found.partitions) != partitions:
            raise


def end_offset(kafka_config: Mapping[str, str], topic: str) -> int:
    """The offset the next message of ``topic`` will get (0 for a topic not created yet)."""
    return end_offsets(kafka_config, topic, 1)[0]


def end_offsets(kafka_config: Mapping[str, str], topic: str, partitions: int) -> tuple[int, ...]:
    """The offset the next message of each of ``topic``'s first ``partitions`` partitions
    will get (0 each for a topic not created yet)."""
    consumer = Consumer(
        {**kafka_config, "group.id": "pgshovel-bench", "enable.auto.commit": False},
        logger=KAFKA_LOG,
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        described = metadata.topics.get(topic)
        if described is None or described.error is not None or not described.partitions:
            return (0,) * partitions
        return tuple(
            int(consumer.get_watermark_offsets(TopicPartition(topic, number), timeout=10)[1])
            for number in range(partitions)
        )
    finally:
        consumer.close()


def message_sizes(
    kafka_config: Mapping[str, str], topic: str, start: int, end: int, timeout: float = 120.0
) -> list[int]:
    """The payload size of every message of ``topic`` in offsets [start, end)."""
    consumer = Consumer(
        {
            **kafka_config,
            "group.id": "pgshovel-bench",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": 8 << 20,
        },
        logger=KAFKA_LOG,
    )
    sizes: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + timeout
        offset = start
        while offset < end and time.monotonic() < deadline:
            for record in consumer.consume(num_messages=10_000, timeout=0.5):
                if record.error() is not None:
                    continue
                sizes.append(len(record.value() or b""))
                offset = (record.offset() or 0) + 1
    finally:
        consumer.close()
    if offset < end:
        raise RuntimeError(
            f"read {len(sizes)!r} messages of {topic!r} up to offset {offset!r}, expected {end!r}; "
            "the broker did not deliver them in time"
        )
    return sizes


def committed_mutations(
    kafka_config: Mapping[str, str], topic: str, start: int, timeout: float = 10.0
) -> int:
    """How many mutations the batches committed on ``topic`` from offset ``start`` hold (the
    messages read until the end as it is now)."""
    end = end_offset(kafka_config, topic)
    consumer = Consumer(
        {
            **kafka_config,
            "group.id": "pgshovel-bench",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": 8 << 20,
        },
        logger=KAFKA_LOG,
    )
    committed = pending = 0
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + timeout
        offset = start
        while offset < end and time.monotonic() < deadline:
            for record in consumer.consume(num_messages=10_000, timeout=0.5):
                if record.error() is not None:
                    continue
                message = stream_pb2.Message.FromString(record.value() or b"")
                kind = message.operation.WhichOneof("operation")
                if kind == "begin":
                    pending = 0
                elif kind == "commit":
                    committed += pending
                else:
                    pending += len(mutations_in(message))
                offset = (record.offset() or 0) + 1
    finally:
        consumer.close()
    return committed
