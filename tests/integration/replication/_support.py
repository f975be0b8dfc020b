"""Helpers of the replication integration tests: source tables, dumps, topics, worker configs."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Producer
from psycopg2 import sql

from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.replication.config import ReplicationConfiguration, SparkSettings
from pgshovel.replication.loaders import PostgresSnapshotLoader
from pgshovel.replication.streams import KafkaStream
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.source import connect

ODD_SCHEMA = 'Odd "Schema"'
ODD_TABLE = "Mixed Cäse ταβλε"

TYPE_MATRIX_DDL = '''
CREATE SCHEMA {schema};
CREATE TABLE {table} (
    "Key A" integer NOT NULL,
    "kéy ""b""" text NOT NULL,
    c_bool boolean, c_int2 smallint, c_int8 bigint, c_float4 real, c_float8 double precision,
    c_numeric numeric(20, 5), c_numeric_free numeric, c_text text, c_varchar varchar(10),
    c_char char(3), c_bytea bytea, c_date date, c_ts timestamp, c_tstz timestamptz, c_time time,
    c_timetz timetz, c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb,
    c_int_array integer[], c_text_array text[], c_inet inet,
    PRIMARY KEY ("Key A", "kéy ""b""")
)
'''

TYPE_MATRIX_ROWS = """
INSERT INTO {table} SELECT
    i / 7, 'k' || (i %% 7),
    i %% 2 = 0, (i %% 30000)::smallint, i::bigint * 1000000007, i / 3.0, i / 7.0,
    i * 1.25, i::numeric / 3, 'row ' || i, left('v' || i, 10), 'c' || (i %% 10),
    decode(lpad(to_hex(i), 8, '0'), 'hex'), date '2000-01-01' + i,
    timestamp '2020-01-01 00:00:00.123456' + i * interval '1 minute',
    timestamptz '2020-01-01 00:00:00+02' + i * interval '1 second',
    time '10:00' + i * interval '1 second',
    timetz '10:00+05:30', i * interval '1 hour 3 minutes', md5(i::text)::uuid,
    json_build_object('i', i), jsonb_build_object('i', i, 'a', array[i, i]), array[i, NULL, i + 1],
    array['a' || i, NULL, 'b"c'], ('10.0.' || (i %% 256) || '.1')::inet
FROM generate_series(1, %s) AS i
"""

SPECIAL_ROWS = r"""
INSERT INTO {table} VALUES
    (-1, E'tab\there\nnew\\line', NULL, NULL, NULL, 'NaN', '-Infinity', NULL, 'NaN', E'back\\slash',
     NULL, NULL, '\x', '-infinity', 'infinity', '-infinity', '24:00', '00:00-14', '-1 mons +2 days',
     NULL, '{{"a": [1, 2.50]}}', '{{}}', '{{}}', '{{"x y",NULL,"\\\\"}}', '::1'),
    (-2, 'ünïcødé ✓', true, -32768, -9223372036854775808, '-0', '1e-300', -123456789012345.12345,
     '1e100', '', '', '', '\x00ff', '0044-03-15 BC', '0001-01-01 00:00:00 BC',
     '1999-12-31 23:59:59.999999+00',
     '00:00', '23:59:59.999999+14', '178000000 years', '00000000-0000-0000-0000-000000000000',
     'null', 'null', '{{{{1,2}},{{3,4}}}}', '{{}}', '2001:db8::/32')
"""


def create_type_matrix(dsn: str, rows: int) -> configuration_pb2.ReplicationSetConfiguration:
    """An odd-named table with a composite key and many types, on the source ``dsn``."""
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        names = {
            "schema": sql.Identifier(ODD_SCHEMA),
            "table": sql.Identifier(ODD_SCHEMA, ODD_TABLE),
        }
        cursor.execute(sql.SQL(TYPE_MATRIX_DDL).format(**names))
        cursor.execute(sql.SQL(TYPE_MATRIX_ROWS).format(**names), (rows,))
        cursor.execute(sql.SQL(SPECIAL_ROWS).format(**names))
    connection.close()
    return set_configuration(dsn, [(ODD_SCHEMA, ODD_TABLE)])


def set_configuration(
    dsn: str, tables: Iterable[tuple[str, str]], allow_unkeyed: bool = False
) -> configuration_pb2.ReplicationSetConfiguration:
    configuration = configuration_pb2.ReplicationSetConfiguration(allow_unkeyed=allow_unkeyed)
    configuration.database.dsn = dsn
    for schema, name in tables:
        configuration.tables.add(schema=schema, name=name)
    return configuration


def execute(dsn: str, statement: str | sql.Composable, parameters: Sequence[Any] = ()) -> None:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(statement, parameters or None)
    connection.close()


def dump(dsn: str, schema: str, table: str) -> list[str]:
    """Every row as PostgreSQL's row text, in the order of the row text."""
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(
            sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(sql.Identifier(schema, table))
        )
        rows = [row[0] for row in cursor.fetchall()]
    connection.close()
    return rows


def relation_exists(dsn: str, qualified: str) -> bool:
    """Whether the table (or other relation) ``qualified`` exists in the database at ``dsn``."""
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (qualified,))
        row = cursor.fetchone()
    connection.close()
    return bool(row and row[0])


def ensure_topic(kafka_config: Mapping[str, str], topic: str) -> None:
    """Have the broker create ``topic`` (auto-creation on a metadata request) and elect a leader."""
    producer = Producer(dict(kafka_config))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        metadata = producer.list_topics(topic, timeout=10)
        partitions = metadata.topics[topic].partitions
        if partitions and all(p.leader >= 0 and p.error is None for p in partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic!r} was not created")


def publish(
    kafka_config: Mapping[str, str], topic: str, messages: Sequence[stream_pb2.Message]
) -> None:
    producer = Producer(
        {**kafka_config, "acks": "all", "max.in.flight.requests.per.connection": "1"}
    )
    for message in messages:
        while True:
            try:
                producer.produce(topic, message.SerializeToString())
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0


def worker_configuration(
    target_dsn: str,
    kafka_config: Mapping[str, str],
    topic: str,
    ranges_per_table: int = 4,
    target: Any = None,
) -> ReplicationConfiguration:
    properties = {key: value for key, value in kafka_config.items() if key != "bootstrap.servers"}
    return ReplicationConfiguration(
        spark=SparkSettings(),
        loader=PostgresSnapshotLoader(ranges_per_table=ranges_per_table, progress_interval=1.0),
        stream=KafkaStream(
            kafka_config["bootstrap.servers"], topic=topic, properties=properties, poll_timeout=0.2
        ),
        target=target if target is not None else PostgresTarget(target_dsn),
    )
