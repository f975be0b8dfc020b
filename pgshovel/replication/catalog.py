"""The shapes of a set's tables, read from the source catalog.

For each table of the set: its captured columns in order (every column unless
the set lists some; the key always), their SQL types as ``format_type`` writes
them, and its key: the set's declared key columns, else the primary key, else
none (allowed only when the set allows unkeyed tables). The rules are
``pgshovel.source.captured_shape``'s, the same that admin checked the set with.

The initial snapshot's tables (``snapshot_shapes``) are the set's tables as the
exported snapshot captures them: ``set update`` commits the set in ZooKeeper,
then the source's triggers and its ANNOUNCE/REMOVE events in one transaction,
and the stream after the snapshot holds exactly the events of that transaction
when the snapshot does not see it. So a table is copied with the key and
columns its trigger has in the snapshot; when that differs from the set as read
from ZooKeeper after the export (an update between its two commits), the
snapshot follows the source and the stream's schema events bring the rest: a
table being added is not copied (its ANNOUNCE starts a backfill), one being
removed is copied (its REMOVE stops it), one whose key or columns change is
copied as captured (its ANNOUNCE changes it). A source with none of the set's
triggers (a stream not written by pgshovel's capture there) is copied as the
set says.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from psycopg2.extensions import connection as Connection

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.source import Catalog, TableInfo, TableShape, captured_shape, captured_tables

logger = logging.getLogger(__name__)


def set_shapes(
    connection: Connection, configuration: configuration_pb2.ReplicationSetConfiguration
) -> list[TableShape]:
    """The shapes of every table of the set, in configuration order."""
    catalog = Catalog(connection)
    database = mask_dsn(configuration.database.dsn)
    return [
        captured_shape(
            table,
            catalog.table(table.schema or "public", table.name),
            allow_unkeyed=configuration.allow_unkeyed,
            database=database,
        )
        for table in configuration.tables
    ]


def snapshot_shapes(
    connection: Connection,
    cluster: str,
    set_name: str,
    configuration: configuration_pb2.ReplicationSetConfiguration,
) -> list[TableShape]:
    """The set's tables as the snapshot of ``connection``'s transaction captures them
    (see the module), in ``configuration``'s order, then tables it no longer lists."""
    captured, unknown = captured_tables(connection, cluster, set_name)
    if not captured and not unknown:
        # No trigger of the set in this database: its stream is not written by pgshovel's
        # capture here, so the capture has nothing to say; copy the set as it is.
        return set_shapes(connection, configuration)
    catalog = Catalog(connection)
    database = mask_dsn(configuration.database.dsn)
    shapes: list[TableShape] = []
    for table in configuration.tables:
        identity = (table.schema or "public", table.name)
        info = catalog.table(*identity)
        capture = captured.pop(identity, None)
        if capture is None and identity in unknown:
            # A trigger whose arguments are in another format: copied as the set says.
            shapes.append(
                captured_shape(
                    table, info, allow_unkeyed=configuration.allow_unkeyed, database=database
                )
            )
            continue
        if capture is None:
            logger.warning(
                "table %r.%r of set %r %s in the exported snapshot: it is not copied now (a "
                "set update adding it is being committed: the stream's announcement of it "
                "starts its backfill; if none comes, run 'pgshovel-admin set update %s FILE' "
                "to capture it)",
                *identity,
                set_name,
                "does not exist" if info is None else "has no capture trigger",
                set_name,
            )
            continue
        shape = captured_shape(
            capture.table_configuration(), info, allow_unkeyed=True, database=database
        )
        _note_difference(table, shape, info, configuration, database, set_name)
        shapes.append(shape)
    for capture in captured.values():
        info = catalog.table(*capture.identity)
        if info is None:
            continue
        shape = captured_shape(
            capture.table_configuration(), info, allow_unkeyed=True, database=database
        )
        logger.info(
            "table %r.%r is still captured in the exported snapshot though set %r no longer "
            "lists it (a set update removing it is being committed): it is copied, and the "
            "stream's removal of it stops it",
            *capture.identity,
            set_name,
        )
        shapes.append(shape)
    return shapes


def _note_difference(
    table: configuration_pb2.TableConfiguration,
    shape: TableShape,
    info: TableInfo | None,
    configuration: configuration_pb2.ReplicationSetConfiguration,
    database: str,
    set_name: str,
) -> None:
    """Log when the snapshot copies a table otherwise than the set now says."""
    try:
        configured = captured_shape(
            table,
            info,
            allow_unkeyed=configuration.allow_unkeyed,
            database=database,
        )
    except ConfigurationError:
        configured = None
    if configured is not None and (configured.key, configured.column_names) == (
        shape.key,
        shape.column_names,
    ):
        return
    logger.info(
        "table %r.%r is copied as the exported snapshot captures it (key %r, columns %r), "
        "not yet as set %r says now (a set update is being committed): the stream's "
        "announcement of it brings the change",
        shape.schema,
        shape.name,
        list(shape.key),
        list(shape.column_names),
        set_name,
    )


def by_name(tables: Sequence[TableShape]) -> dict[tuple[str, str], TableShape]:
    return {table.identity: table for table in tables}
