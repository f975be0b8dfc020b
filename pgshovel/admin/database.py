"""What other components read from a database pgshovel-admin installed: the node id.

The node id is a uuid created once per database and cluster (table
``pgshovel_<cluster>.node``); the relay stamps it on every batch so consumers
can tell which source database a batch came from.
"""

from __future__ import annotations

import uuid

from psycopg2.extensions import connection

from pgshovel.admin import catalog
from pgshovel.cluster import names
from pgshovel.errors import DatabaseError


def read_node_id(conn: connection, cluster: str) -> bytes:
    """The 16-byte node id of the database behind ``conn`` in ``cluster``."""
    found = catalog.node_id(conn, cluster)
    if found is None:
        raise DatabaseError(
            f"this database has no pgshovel node id for cluster {cluster!r} "
            f"(no table {names.schema_name(cluster)!r}.node); create a set on it with "
            "'pgshovel-admin set create'"
        )
    return uuid.UUID(found).bytes
