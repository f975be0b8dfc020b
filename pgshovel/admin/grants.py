"""Least privileges in the source: what the relay's and the worker's roles need, as GRANTs.

Pure composition, like ``pgshovel.admin.install``. The admin itself needs a
superuser (event triggers and the PgQ extension require one); the relay and
the worker do not:

* the relay reads PgQ batches (role ``pgq_reader``: the consumer functions and
  the event tables), ticks the queue and sets its ticker limits
  (``pgq.ticker(text)``, ``pgq.set_queue_config``), and reads the cluster
  schema's ``node`` and ``schema_history`` tables; one that snapshots table
  topics also reads the set's tables and writes watermarks, as the worker does;
* the worker reads the set's tables (snapshots, incremental snapshots,
  checksums; ``pg_export_snapshot`` needs no grant) and writes watermark events
  into the set's queue through the cluster schema's ``insert_watermark``, which
  writes nothing but watermarks (so the role cannot forge mutations).

The cluster schema's ``SECURITY DEFINER`` functions are revoked from PUBLIC
(``revoke_statements``, part of every install), so ``USAGE`` on that schema
does not let a relay write schema events. ``pgshovel-admin set grants`` prints
these statements for a set.
"""

from __future__ import annotations

from collections.abc import Iterable

from psycopg2 import sql

from pgshovel.cluster import names
from pgshovel.protocol import configuration_pb2
from pgshovel.source import NODE_TABLE

#: The cluster schema's functions that run as their owner and can be called by
#: name, with their argument types (sql/schema.sql): only the owner may call them
#: (the capture and event triggers do; triggers need no EXECUTE).
PRIVATE_FUNCTIONS: tuple[tuple[str, str], ...] = (
    ("record_schema_event", "text, text, text, oid, text, text, text, text, text, text"),
    ("announce", "oid, text, text, boolean, boolean, text"),
    ("remove", "text, text, text, text, text, text"),
    ("claim", "oid, text"),
)

#: PgQ functions the relay calls beyond the consumer role ``pgq_reader``.
RELAY_FUNCTIONS = ("pgq.ticker(text)", "pgq.set_queue_config(text, text, text)")
#: The cluster schema's function the worker writes watermarks with (its arguments).
WATERMARK_FUNCTION = ("insert_watermark", "text, text, text, text")


def revoke_statements(cluster: str) -> list[sql.Composable]:
    """Take EXECUTE on the cluster schema's callable SECURITY DEFINER functions from PUBLIC."""
    schema = sql.Identifier(names.schema_name(cluster))
    return [
        sql.SQL("REVOKE ALL ON FUNCTION {}.{}({}) FROM PUBLIC").format(
            schema, sql.Identifier(name), sql.SQL(arguments)
        )
        for name, arguments in (*PRIVATE_FUNCTIONS, WATERMARK_FUNCTION)
    ]


def _functions(signatures: Iterable[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.SQL(signature) for signature in signatures)


def relay_grants(cluster: str, database: str, role: str) -> list[sql.Composable]:
    """What a relay's role needs in the set's database (the same for every set of it)."""
    grantee = sql.Identifier(role)
    schema = names.schema_name(cluster)
    return [
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), grantee),
        sql.SQL("GRANT pgq_reader TO {}").format(grantee),
        sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(_functions(RELAY_FUNCTIONS), grantee),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), grantee),
        sql.SQL("GRANT SELECT ON {}, {} TO {}").format(
            sql.Identifier(schema, NODE_TABLE), sql.Identifier(schema, "schema_history"), grantee
        ),
    ]


def table_readers(
    configuration: configuration_pb2.ReplicationSetConfiguration, role: str
) -> list[sql.Composable]:
    """SELECT on the set's tables (and USAGE on their schemas) for ``role``."""
    grantee = sql.Identifier(role)
    schemas = sorted({table.schema or "public" for table in configuration.tables})
    tables = [
        sql.Identifier(table.schema or "public", table.name) for table in configuration.tables
    ]
    return [
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.SQL(", ").join(sql.Identifier(schema) for schema in schemas), grantee
        ),
        sql.SQL("GRANT SELECT ON {} TO {}").format(sql.SQL(", ").join(tables), grantee),
    ]


def watermark_writer(cluster: str, role: str) -> sql.Composable:
    """EXECUTE on the cluster schema's ``insert_watermark`` (chunked snapshots write watermarks)."""
    name, arguments = WATERMARK_FUNCTION
    return sql.SQL("GRANT EXECUTE ON FUNCTION {}({}) TO {}").format(
        sql.Identifier(names.schema_name(cluster), name), sql.SQL(arguments), sql.Identifier(role)
    )


def standby_watcher(role: str) -> sql.Composable:
    """What failover-safe publishing needs: the replay positions in pg_stat_replication."""
    return sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(role))


def worker_grants(
    cluster: str,
    configuration: configuration_pb2.ReplicationSetConfiguration,
    database: str,
    role: str,
) -> list[sql.Composable]:
    """What a worker's role needs in the set's database for the set's current tables."""
    grantee = sql.Identifier(role)
    cluster_schema = names.schema_name(cluster)
    name, arguments = WATERMARK_FUNCTION
    schemas = sorted(
        {table.schema or "public" for table in configuration.tables} | {cluster_schema}
    )
    tables = [
        sql.Identifier(table.schema or "public", table.name) for table in configuration.tables
    ]
    return [
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), grantee),
        sql.SQL("GRANT EXECUTE ON FUNCTION {}({}) TO {}").format(
            sql.Identifier(cluster_schema, name), sql.SQL(arguments), grantee
        ),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.SQL(", ").join(sql.Identifier(schema) for schema in schemas), grantee
        ),
        sql.SQL("GRANT SELECT ON {} TO {}").format(sql.SQL(", ").join(tables), grantee),
    ]
