"""Helpers for capture tests: install a set through the Python API and decode its queue."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg2
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.admin import planning, twophase
from pgshovel.cluster import names
from pgshovel.cluster.sets import parse_set_document
from pgshovel.protocol import stream_pb2
from pgshovel.relay.events import QueueEvent, QueueEventDecoder
from pgshovel.relay.packing import unpacked
from pgshovel.stream.provenance import ProvenanceResolver
from tests.integration.admin._admin import context

SET = "capture"


def install(
    zookeeper: KazooClient,
    cluster: str,
    dsn: str,
    tables: Sequence[dict[str, Any]],
    *,
    allow_unkeyed: bool = False,
    packing: dict[str, int] | None = None,
) -> None:
    """Initialize the cluster and create the set (as `pgshovel-admin` would); ``packing`` is the
    set file's (unset: the defaults)."""
    document: dict[str, Any] = {
        "database": {"dsn": dsn},
        "allow_unkeyed": allow_unkeyed,
        "tables": list(tables),
    }
    if packing is not None:
        document["packing"] = packing
    configuration = parse_set_document(document, "test")
    with context(zookeeper, cluster) as ctx:
        twophase.execute(planning.plan_cluster_initialize(ctx), ctx.connections, zookeeper)
        plan = planning.plan_set_create(ctx, SET, configuration)
        twophase.execute(plan, ctx.connections, zookeeper)


def captured(dsn: str, cluster: str) -> list[stream_pb2.Mutation]:
    """Every mutation in the set's queue, decoded, in event order."""
    return [
        message.operation.mutation
        for message in captured_messages(dsn, cluster)
        if message.operation.WhichOneof("operation") == "mutation"
    ]


def queue_rows(dsn: str, cluster: str) -> list[tuple[Any, ...]]:
    """The rows of the set's queue as PgQ holds them (packed rows too), in ``ev_id`` order."""
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = %s",
                (names.queue_name(cluster, SET),),
            )
            schema, table = cursor.fetchone()[0].split(".")  # type: ignore[index]
            cursor.execute(
                sql.SQL(
                    "SELECT ev_id, (extract(epoch FROM ev_time) * 1000000)::int8, ev_txid, "
                    "ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4 "
                    "FROM {} ORDER BY ev_id"
                ).format(sql.Identifier(schema, table))
            )
            return list(cursor.fetchall())
    finally:
        conn.close()


def queue_events(dsn: str, cluster: str) -> list[QueueEvent]:
    """Every event of the set's queue in event order, packed rows expanded as the relay
    expands them (what the queue would hold without packing)."""
    rows = queue_rows(dsn, cluster)
    return [QueueEvent(*event) for chunk in unpacked([rows]) for event in chunk]


def event_rows(event: QueueEvent) -> Any:
    """An event's data parsed: ``[old, new]`` or ``[old, new, provenance]`` (a change the
    trigger packed as COPY lines comes from the relay's expansion already parsed)."""
    return event.data if isinstance(event.data, list) else json.loads(str(event.data))


def captured_messages(dsn: str, cluster: str) -> list[stream_pb2.Message]:
    """Every event in the set's queue (mutations, schema changes), decoded, in event order,
    each mutation with its provenance in full (as a stream reader resolves it)."""
    events = queue_events(dsn, cluster)
    conn = psycopg2.connect(dsn)
    try:
        decoder = QueueEventDecoder.for_queue(conn, cluster, names.queue_name(cluster, SET))
        messages = []
        resolver = ProvenanceResolver()
        for event in events:
            message = stream_pb2.Message()
            decoder.decode_into(event, message)
            if message.operation.WhichOneof("operation") == "mutation":
                problem = resolver.resolve(message.operation.mutation)
                assert not problem, problem
            messages.append(message)
        return messages
    finally:
        conn.close()


def row(values: stream_pb2.Row) -> dict[str, stream_pb2.Value]:
    return {column.name: column.value for column in values.columns}


def ints(values: stream_pb2.Row) -> dict[str, int | None]:
    """A row of integer (or null) columns as plain values."""
    return {
        column.name: None if column.value.HasField("null") else column.value.int64
        for column in values.columns
    }
