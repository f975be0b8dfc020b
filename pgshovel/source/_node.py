"""The node id: the uuid that names a source database within a cluster.

Created once per database and cluster by ``pgshovel-admin`` (table
``pgshovel_<cluster>.node``); the relay stamps it on every batch so consumers
can tell which source database a batch came from, and admin uses it to tell
whether two connection strings reach the same database.
"""

from __future__ import annotations

import uuid

from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError

NODE_TABLE = "node"

_EXISTS = (
    "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s"
)


def node_id(connection: Connection, cluster: str) -> str | None:
    """The node id (uuid text) of this database in ``cluster``; None when not installed."""
    schema = names.schema_name(cluster)
    with connection.cursor() as cursor:
        cursor.execute(_EXISTS, (schema, NODE_TABLE))
        if cursor.fetchone() is None:
            return None
        cursor.execute(
            sql.SQL("SELECT id::text FROM {}").format(sql.Identifier(schema, NODE_TABLE))
        )
        found = cursor.fetchone()
    return None if found is None else str(found[0])


def read_node_id(connection: Connection, cluster: str) -> bytes:
    """The 16-byte node id of the database behind ``connection``; an error when not installed."""
    found = node_id(connection, cluster)
    if found is None:
        raise ConfigurationError(
            f"this database has no pgshovel node id for cluster {cluster!r} "
            f"(no table {names.schema_name(cluster)!r}.{NODE_TABLE}); create a set on it with "
            "'pgshovel-admin set create'"
        )
    return uuid.UUID(found).bytes
