"""Read-only reports: cluster inspect, set list, set inspect.

Reports show configuration as YAML with DSN passwords masked, set versions,
for each table whether this set's triggers are installed at the current
version, and what runs (``pgshovel.inspection.activity``): the leading relay and its
epoch, the queue's backlog, each worker's position and lag. An unreachable
database is reported, not raised, so the rest of the report still shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg2
import yaml

import pgshovel
from pgshovel.admin import install
from pgshovel.admin.planning import Context
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn, stored_password_warning
from pgshovel.cluster.sets import to_document
from pgshovel.cluster.versions import set_version
from pgshovel.errors import PgshovelError
from pgshovel.inspection import activity, catalog
from pgshovel.protocol import configuration_pb2
from pgshovel.source import Catalog, node_id


@dataclass(frozen=True)
class SetSummary:
    """One line of ``set list``."""

    name: str
    version: str
    database: str  # masked DSN
    tables: int


def list_sets(context: Context) -> list[SetSummary]:
    summaries = []
    for set_name in context.store.set_names():
        configuration = context.store.read_set(set_name).value
        summaries.append(
            SetSummary(
                name=set_name,
                version=set_version(configuration),
                database=mask_dsn(configuration.database.dsn),
                tables=len(configuration.tables),
            )
        )
    return summaries


def describe_cluster(context: Context) -> str:
    node = context.store.read_cluster()
    lines = [
        f"cluster: {context.cluster}",
        f"version: {node.value.version} (this pgshovel: {pgshovel.__version__})",
        "sets:",
    ]
    summaries = list_sets(context)
    lines += [
        f"  {item.name}: version {item.version}, {item.tables} table(s), {item.database}"
        for item in summaries
    ]
    for name in context.store.set_names():
        warning = stored_password_warning(name, context.store.read_set(name).value.database.dsn)
        if warning is not None:
            lines.append(f"warning: {warning}")
    if not summaries:
        lines.append("  (none)")
    return "\n".join(lines)


def table_status(
    context: Context,
    set_name: str,
    configuration: configuration_pb2.ReplicationSetConfiguration,
    conn: psycopg2.extensions.connection,
) -> list[str]:
    version = set_version(configuration)
    every = install.trigger_names(context.cluster, set_name)
    main = names.trigger_name(context.cluster, set_name)
    statement = {main + suffix for suffix in install.STATEMENT_TRIGGERS.values()}
    queue = names.queue_name(context.cluster, set_name)
    update = f"'pgshovel-admin set update {set_name} FILE'"
    lines = []
    for table in configuration.tables:
        label = f"{table.schema}.{table.name}"
        last = catalog.last_schema_event(conn, context.cluster, queue, table.schema, table.name)
        info = Catalog(conn).table(table.schema, table.name)
        if info is None:
            lines.append(f"  {label}: {_missing(conn, last, update)}")
            continue
        # What set create / set update install on it now (see install.install_triggers).
        row_triggers = catalog.row_triggers_reason(conn, table.schema, table.name)
        expected = set(every) - statement if row_triggers else set(every)
        found = catalog.installed_triggers(conn, table.schema, table.name)
        mine = [found[name] for name in sorted(expected) if name in found]
        if not row_triggers and not statement & set(found) and set(every) - statement <= set(found):
            # Installed before statement triggers: capturing, row by row.
            status = "triggers outdated (row triggers: set update installs statement triggers)"
        elif len(mine) < len(expected) and (
            last is not None and (last.uncaptured or last.relation != info.oid)
        ):
            status = (
                "not captured: created again (or renamed onto this name) after the set's table "
                f"was dropped or renamed; the relay stops at it: run {update}, after which the "
                "copy reads it again"
            )
        elif len(mine) < len(expected):
            status = "triggers missing"
        elif row_triggers and statement & set(found):
            status = f"triggers outdated (statement triggers, but {row_triggers})"
        elif any(len(trigger.arguments) < 2 or trigger.arguments[1] != version for trigger in mine):
            versions = sorted({trigger.arguments[1] for trigger in mine if trigger.arguments[1:]})
            status = f"triggers outdated (version {', '.join(versions)})"
        elif not all(trigger.enabled for trigger in mine):
            status = "triggers disabled"
        else:
            status = "installed"
        lines.append(f"  {label}: {status}")
    return lines


def _missing(
    conn: psycopg2.extensions.connection, last: catalog.LastSchemaEvent | None, update: str
) -> str:
    """What became of a table of the set that has no table under its name, as the schema
    history tells it."""
    if last is not None:
        renamed = catalog.table_name(conn, last.relation)
        if renamed is not None:
            return (
                f"renamed to {renamed[0]}.{renamed[1]} (captured under its new name): write "
                f"the new name into the set's file and run {update}"
            )
        if last.kind == "drop":
            return (
                "table dropped (its copy was dropped too): remove it from the set's file, or "
                f"create it again, and run {update}"
            )
    return "table missing"


def describe_set(context: Context, set_name: str) -> str:
    configuration = context.store.read_set(set_name).value
    lines = [
        f"set: {set_name}",
        f"version: {set_version(configuration)}",
    ]
    warning = stored_password_warning(set_name, configuration.database.dsn)
    if warning is not None:
        lines.append(f"warning: {warning}")
    lines.append("configuration:")
    document = yaml.safe_dump(to_document(configuration), sort_keys=False, allow_unicode=True)
    lines += [f"  {line}" for line in document.rstrip().splitlines()]
    client = context.store.client
    lines += activity.relay_lines(activity.read_relay(client, context.cluster, set_name))
    lines += activity.worker_lines(
        activity.read_workers(client, context.cluster, set_name), time.time()
    )
    try:
        conn = context.connections.get(configuration.database.dsn)
        node = node_id(conn, context.cluster)
        queue = names.queue_name(context.cluster, set_name)
        lines.append(f"node: {node or 'not installed'}")
        present = catalog.queue_exists(conn, queue)
        lines.append(f"queue: {queue} ({'present' if present else 'missing'})")
        if present:
            lines += activity.queue_lines(activity.read_queue(conn, queue))
        lines.append("tables:")
        lines += table_status(context, set_name, configuration, conn)
    except PgshovelError as error:
        lines.append(f"database: unreachable ({error})")
    return "\n".join(lines)
