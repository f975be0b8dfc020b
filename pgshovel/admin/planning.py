"""Planning every change pgshovel-admin makes: read ZooKeeper and catalogs, build a Plan.

Nothing here writes. Each ``plan_*`` function validates the request against
what it read (cluster initialized, set present or absent, tables, keys and
columns in the database) and returns the statements per database and the
ZooKeeper multi-op, with the node versions it read as checks. A set's DSN goes
into ZooKeeper, so a DSN with a password is refused before anything is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg2 import sql
from psycopg2.extensions import connection

import pgshovel
from pgshovel.admin import capture_library, changes, install, schema_capture
from pgshovel.admin.connections import Connections
from pgshovel.admin.plan import DatabaseStep, Plan, ZooKeeperOperation
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn, refuse_password
from pgshovel.cluster.versions import is_newer, set_version
from pgshovel.cluster.zookeeper import ClusterStore, Versioned
from pgshovel.errors import ConfigurationError, DatabaseError
from pgshovel.inspection import catalog
from pgshovel.protocol import configuration_pb2
from pgshovel.source import Catalog, node_id

SetConfiguration = configuration_pb2.ReplicationSetConfiguration


@dataclass(frozen=True)
class Context:
    """What every planner needs: the cluster, its ZooKeeper store and database connections."""

    cluster: str
    store: ClusterStore
    connections: Connections


def _check(node: Versioned[Any]) -> ZooKeeperOperation:
    return ZooKeeperOperation("check", node.path, version=node.version, description="unchanged")


def _hstore_schema(conn: connection, dsn: str) -> str | None:
    """Where hstore is installed (None: it will be installed); an error if unavailable."""
    schema = catalog.extension_schema(conn, "hstore")
    if schema is None and not catalog.extension_available(conn, "hstore"):
        raise DatabaseError(
            f"database {mask_dsn(dsn)!r} lacks the hstore extension; install PostgreSQL's "
            "contrib package on that server"
        )
    if catalog.extension_schema(conn, "pgq") is None and not catalog.extension_available(
        conn, "pgq"
    ):
        raise DatabaseError(
            f"database {mask_dsn(dsn)!r} lacks the pgq extension; install PgQ "
            "(e.g. the postgresql-<version>-pgq3 package) on that server"
        )
    return schema


def _capture(conn: connection, dsn: str) -> capture_library.Implementation:
    """The capture function this database gets (the C trigger where it can run)."""
    return capture_library.choose(conn, mask_dsn(dsn))


def _resolve_tables(
    conn: connection, configuration: SetConfiguration
) -> list[install.TableCapture]:
    database = mask_dsn(configuration.database.dsn)
    packing = install.packing_argument(configuration)
    return [
        install.resolve_table(
            table,
            Catalog(conn).table(table.schema, table.name),
            allow_unkeyed=configuration.allow_unkeyed,
            database=database,
            row_triggers=catalog.row_triggers_reason(conn, table.schema, table.name) or "",
            packing=packing,
        )
        for table in configuration.tables
    ]


def _only(
    configuration: SetConfiguration, table: configuration_pb2.TableConfiguration
) -> SetConfiguration:
    """``configuration`` with ``table`` as its only table."""
    single = SetConfiguration()
    single.CopyFrom(configuration)
    del single.tables[:]
    single.tables.append(table)
    return single


def _set_data(configuration: SetConfiguration) -> tuple[bytes, str]:
    return configuration.SerializeToString(deterministic=True), set_version(configuration)


def plan_cluster_initialize(context: Context) -> Plan:
    """Create the cluster node (with this pgshovel's version) and its sets node."""
    if context.store.cluster_exists():
        raise ConfigurationError(
            f"cluster {context.cluster!r} is already initialized; "
            "see 'pgshovel-admin cluster inspect'"
        )
    configuration = configuration_pb2.ClusterConfiguration(version=pgshovel.__version__)
    return Plan(
        summary=f"initialize cluster {context.cluster!r} at version {pgshovel.__version__}",
        cluster=context.cluster,
        zookeeper=(
            ZooKeeperOperation(
                "create",
                names.cluster_path(context.cluster),
                configuration.SerializeToString(deterministic=True),
                description=f"ClusterConfiguration version {pgshovel.__version__}",
            ),
            ZooKeeperOperation("create", names.sets_path(context.cluster)),
        ),
    )


def plan_set_create(context: Context, set_name: str, configuration: SetConfiguration) -> Plan:
    """Install capture for a new set and record it in ZooKeeper."""
    names.validate_set_name(set_name)
    refuse_password(set_name, configuration.database.dsn)
    cluster_node = context.store.read_cluster()
    if context.store.set_exists(set_name):
        raise ConfigurationError(
            f"set {set_name!r} already exists in cluster {context.cluster!r}; "
            "use 'pgshovel-admin set update' to change it"
        )
    dsn = configuration.database.dsn
    conn = context.connections.get(dsn)
    hstore = _hstore_schema(conn, dsn)
    tables = _resolve_tables(conn, configuration)
    data, version = _set_data(configuration)
    implementation = _capture(conn, dsn)
    statements = [
        *install.base_statements(context.cluster, hstore, implementation),
        install.create_queue(context.cluster, set_name),
        schema_capture.forget(context.cluster, set_name),
    ]
    for table in tables:
        statements += install.install_triggers(context.cluster, set_name, version, table)
        statements.append(
            schema_capture.announce(
                context.cluster, set_name, table.schema, table.name, "pgshovel set create"
            )
        )
    return Plan(
        summary=f"create set {set_name!r} in cluster {context.cluster!r} at version {version}",
        cluster=context.cluster,
        databases=(DatabaseStep(dsn, tuple(statements), implementation),),
        tables=tuple(
            changes.added(set_name, table, entry)
            for table, entry in zip(tables, configuration.tables, strict=True)
        ),
        grants=tuple(
            changes.grant_lines(context.cluster, set_name, created=True, added=len(tables))
        ),
        zookeeper=(
            _check(cluster_node),
            ZooKeeperOperation(
                "create",
                names.set_path(context.cluster, set_name),
                data,
                description=f"ReplicationSetConfiguration version {version}",
            ),
        ),
    )


def _same_database(context: Context, old_dsn: str, new_dsn: str) -> None:
    if old_dsn == new_dsn:
        return
    old_node = node_id(context.connections.get(old_dsn), context.cluster)
    new_node = node_id(context.connections.get(new_dsn), context.cluster)
    if old_node is None or old_node != new_node:
        raise ConfigurationError(
            f"the new dsn {mask_dsn(new_dsn)!r} is not the set's database "
            f"{mask_dsn(old_dsn)!r} (node ids {old_node!r} and {new_node!r}); a set cannot "
            "move between databases: drop it and create it again"
        )


def plan_set_update(
    context: Context,
    set_name: str,
    configuration: SetConfiguration,
    *,
    identity_checked: bool = False,
    extra: Sequence[sql.Composable] = (),
    summary: str = "",
) -> Plan:
    """Reinstall a set's triggers for its new configuration; remove those of dropped tables.

    A new DSN must reach the same database (node id), unless the caller checked
    that already (``set failover``, whose old primary may be gone); ``extra``
    statements run last in the same transaction."""
    refuse_password(set_name, configuration.database.dsn)
    cluster_node = context.store.read_cluster()
    current = context.store.read_set(set_name)
    dsn = configuration.database.dsn
    if not identity_checked:
        _same_database(context, current.value.database.dsn, dsn)
    conn = context.connections.get(dsn)
    hstore = _hstore_schema(conn, dsn)
    tables = _resolve_tables(conn, configuration)
    data, version = _set_data(configuration)
    kept = {(table.schema, table.name) for table in tables}
    implementation = _capture(conn, dsn)
    statements = [
        *install.base_statements(context.cluster, hstore, implementation),
        install.create_queue(context.cluster, set_name),
    ]
    gone: list[tuple[str, str]] = []
    for old in current.value.tables:
        if (old.schema, old.name) in kept:
            continue
        if Catalog(conn).table(old.schema, old.name) is None:
            gone.append((old.schema, old.name))
            continue
        statements += install.drop_triggers(context.cluster, set_name, old.schema, old.name)
    for old in current.value.tables:
        if (old.schema, old.name) not in kept:
            statements.append(
                schema_capture.remove(
                    context.cluster, set_name, version, old.schema, old.name, "pgshovel set update"
                )
            )
    for table in tables:
        statements += install.install_triggers(context.cluster, set_name, version, table)
        statements.append(
            schema_capture.announce(
                context.cluster, set_name, table.schema, table.name, "pgshovel set update"
            )
        )
    statements += extra
    table_changes = changes.set_update(
        set_name, current.value.tables, tables, configuration.tables, gone
    )
    added = sum(change.change == "added" for change in table_changes)
    return Plan(
        summary=summary
        or (
            f"update set {set_name!r} in cluster {context.cluster!r} "
            f"from version {set_version(current.value)} to {version}"
        ),
        cluster=context.cluster,
        databases=(DatabaseStep(dsn, tuple(statements), implementation),),
        zookeeper=(
            _check(cluster_node),
            ZooKeeperOperation(
                "set",
                current.path,
                data,
                version=current.version,
                description=f"ReplicationSetConfiguration version {version}",
            ),
        ),
        tables=tuple(table_changes),
        grants=tuple(changes.grant_lines(context.cluster, set_name, created=False, added=added)),
    )


def plan_set_drop(context: Context, set_name: str) -> Plan:
    """Remove a set's triggers and queue, and its ZooKeeper node."""
    cluster_node = context.store.read_cluster()
    current = context.store.read_set(set_name)
    relay = context.store.relay_children(set_name)
    if relay:
        raise ConfigurationError(
            f"set {set_name!r} has a running relay ({len(relay)} election participant(s)); "
            "stop its relays first"
        )
    dsn = current.value.database.dsn
    conn = context.connections.get(dsn)
    statements = []
    table_changes = []
    for table in current.value.tables:
        exists = Catalog(conn).table(table.schema, table.name) is not None
        table_changes.append(changes.removed(set_name, table, exists=exists))
        if exists:
            statements += install.drop_triggers(context.cluster, set_name, table.schema, table.name)
    if catalog.queue_exists(conn, names.queue_name(context.cluster, set_name)):
        statements.append(install.drop_queue(context.cluster, set_name))
    zookeeper = [_check(cluster_node)]
    if relay is not None:
        zookeeper.append(ZooKeeperOperation("delete", names.relay_path(context.cluster, set_name)))
    for parent in (
        names.requests_path(context.cluster, set_name),
        names.results_path(context.cluster, set_name),
        names.workers_path(context.cluster, set_name),
        names.relays_path(context.cluster, set_name),
    ):
        children = context.store.children(parent)
        if children is None:
            continue
        zookeeper += [ZooKeeperOperation("delete", f"{parent}/{child}") for child in children]
        zookeeper.append(ZooKeeperOperation("delete", parent))
    zookeeper.append(ZooKeeperOperation("delete", current.path, version=current.version))
    return Plan(
        summary=f"drop set {set_name!r} from cluster {context.cluster!r}",
        cluster=context.cluster,
        databases=(DatabaseStep(dsn, tuple(statements)),) if statements else (),
        zookeeper=tuple(zookeeper),
        tables=tuple(table_changes),
    )


def plan_cluster_upgrade(context: Context, *, force: bool) -> Plan:
    """Reinstall the capture function in every set's database and every set's triggers;
    record this version."""
    cluster_node = context.store.read_cluster()
    recorded = cluster_node.value.version
    if is_newer(recorded, pgshovel.__version__) and not force:
        raise ConfigurationError(
            f"cluster {context.cluster!r} is at version {recorded!r}, newer than this "
            f"pgshovel ({pgshovel.__version__!r}); refusing to downgrade (use --force to do it)"
        )
    steps: dict[str, DatabaseStep] = {}
    checks = []
    notes: list[str] = []
    table_changes: list[changes.TableChange] = []
    for set_name in context.store.set_names():
        node = context.store.read_set(set_name)
        checks.append(_check(node))
        dsn = node.value.database.dsn
        conn = context.connections.get(dsn)
        # Several DSNs may reach one database: one transaction per database, or they
        # would wait on each other's locks.
        key = node_id(conn, context.cluster) or dsn
        if key not in steps:
            implementation = _capture(conn, dsn)
            base = install.base_statements(
                context.cluster, _hstore_schema(conn, dsn), implementation
            )
            steps[key] = DatabaseStep(dsn, tuple(base), implementation)
        # Every table's triggers as this pgshovel installs them (statement triggers where
        # they can capture), then its shape, recorded once in the history the relay
        # decodes with.
        statements: list[sql.Composable] = []
        present = [
            table
            for table in node.value.tables
            if Catalog(conn).table(table.schema, table.name) is not None
        ]
        version = set_version(node.value)
        for table in present:
            try:
                (resolved,) = _resolve_tables(conn, _only(node.value, table))
            except ConfigurationError as error:
                notes.append(
                    f"set {set_name!r}: triggers of {table.schema!r}.{table.name!r} kept as "
                    f"they are ({error}); fix the table or the set and run "
                    "'pgshovel-admin set update'"
                )
                table_changes.append(changes.kept(set_name, table))
                continue
            table_changes.append(changes.reinstalled(set_name, resolved, table, table))
            statements += install.install_triggers(context.cluster, set_name, version, resolved)
        statements += [
            schema_capture.announce(
                context.cluster, set_name, table.schema, table.name, "pgshovel cluster upgrade"
            )
            for table in present
        ]
        step = steps[key]
        steps[key] = DatabaseStep(step.dsn, (*step.statements, *statements), step.capture)
    upgraded = configuration_pb2.ClusterConfiguration(version=pgshovel.__version__)
    return Plan(
        summary=(
            f"upgrade cluster {context.cluster!r} from version {recorded} "
            f"to {pgshovel.__version__} ({len(steps)} database(s))"
        ),
        cluster=context.cluster,
        databases=tuple(steps.values()),
        zookeeper=(
            ZooKeeperOperation(
                "set",
                cluster_node.path,
                upgraded.SerializeToString(deterministic=True),
                version=cluster_node.version,
                description=f"ClusterConfiguration version {pgshovel.__version__}",
            ),
            *checks,
        ),
        notes=tuple(notes),
        tables=tuple(table_changes),
        grants=tuple(changes.grant_lines(context.cluster)),
    )
