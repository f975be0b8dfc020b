"""Helpers for table-topic tests: create topics like an operator, fold topics, decode values."""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any

import psycopg2
from confluent_kafka import Consumer, TopicPartition
from psycopg2 import sql

from pgshovel.sandbox import SandboxConnection
from pgshovel.sandbox import create_topic as sandbox_create_topic


def create_topic(
    sandbox: SandboxConnection, topic: str, partitions: int = 1, compact: bool = False
) -> None:
    """Create ``topic`` with kafka-topics.sh, as an operator of a 0.9 broker has to."""
    sandbox_create_topic(sandbox, topic, partitions, compact)


def read_all(
    kafka_config: dict[str, str], topic: str, limit: float = 60
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every message of every partition of ``topic``: (partition, offset, key, value)."""
    consumer = Consumer(
        {**kafka_config, "group.id": "pgshovel-test", "enable.auto.commit": "false"}
    )
    records: list[tuple[int, int, bytes | None, bytes | None]] = []
    try:
        found = consumer.list_topics(topic, timeout=30).topics[topic]
        ends: dict[int, int] = {}
        assignment = []
        for partition in found.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=30, cached=False
            )
            if high > low:
                ends[partition] = high
                assignment.append(TopicPartition(topic, partition, low))
        consumer.assign(assignment)
        deadline = time.monotonic() + limit
        while ends:
            if time.monotonic() > deadline:
                raise AssertionError(f"could not read {topic!r} to its end")
            record = consumer.poll(0.5)
            if record is None or record.error() is not None:
                continue
            partition, offset = record.partition(), record.offset()
            assert partition is not None and offset is not None
            records.append((partition, offset, record.key(), record.value()))
            if offset + 1 >= ends.get(partition, 0):
                ends.pop(partition, None)
    finally:
        consumer.close()
    return records


def fold(records: list[tuple[int, int, bytes | None, bytes | None]]) -> dict[bytes, Any]:
    """Last value per key, tombstones deleting (what a compacted topic converges to)."""
    state: dict[bytes, Any] = {}
    for _partition, _offset, key, value in records:
        assert key is not None, "a table-topic message without a key"
        if value is None:
            state.pop(key, None)
        else:
            state[key] = json.loads(value)
    return state


_ASTRONOMICAL = re.compile(r"^([+-]?)(\d{4,})(-\d\d-\d\d.*)$")


def _from_iso_temporal(text: str) -> str:
    """ISO 8601 with astronomical years -> PostgreSQL input (``... BC`` for year <= 0)."""
    match = _ASTRONOMICAL.match(text)
    if match is None:
        return text
    sign, digits, rest = match.groups()
    year = -int(digits) if sign == "-" else int(digits)
    if year > 0:
        return f"{year:04d}{rest}"
    return f"{1 - year:04d}{rest} BC"


def to_postgres_input(value: Any, type_name: str) -> Any:
    """The inverse of the documented mapping: typed JSON -> what json_populate_record takes."""
    if value is None:
        return None
    if type_name == "bytea":
        return "\\x" + base64.b64decode(value).hex()
    if type_name in ("date", "timestamp", "timestamptz") and isinstance(value, str):
        return _from_iso_temporal(value)
    return value


def column_types(dsn: str, schema: str, table: str) -> dict[str, str]:
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT a.attname, t.typname FROM pg_attribute a"
                " JOIN pg_type t ON t.oid = a.atttypid"
                " WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
                (f"{schema}.{table}",),
            )
            return dict(cursor.fetchall())
    finally:
        connection.close()


def compare_with_source(
    dsn: str, schema: str, table: str, rows: list[dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """(source rows missing from ``rows``, ``rows`` not in the source), as PostgreSQL row text."""
    types = column_types(dsn, schema, table)
    decoded = [
        {name: to_postgres_input(value, types[name]) for name, value in row.items()} for row in rows
    ]
    target = sql.Identifier(schema, table)
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                sql.SQL(
                    "SELECT r::text FROM json_array_elements(%s::json) AS e,"
                    " json_populate_record(NULL::{}, e) AS r"
                ).format(target),
                (json.dumps(decoded),),
            )
            folded = sorted(text for (text,) in cursor.fetchall())
            cursor.execute(sql.SQL("SELECT s::text FROM {} AS s").format(target))
            source = sorted(text for (text,) in cursor.fetchall())
    finally:
        connection.close()
    return sorted(set(source) - set(folded)), sorted(set(folded) - set(source))


def snapshots_done(kafka_config: dict[str, str], set_topic: str, topics: list[str]) -> bool:
    """Whether the relay recorded a finished snapshot of every one of ``topics``."""
    state_topic = f"__pgshovel-snapshots.{set_topic}"
    try:
        state = fold(read_all(kafka_config, state_topic, limit=10))
    except (AssertionError, KeyError):
        return False  # not there yet
    return all(state.get(topic.encode(), {}).get("status") == "done" for topic in topics)
