"""The SQL that captures schema changes: event triggers, the schema history, announcements.

Pure composition, like ``pgshovel.admin.install``: ``statements`` installs (or
replaces) the cluster's schema capture from sql/schema.sql; ``announce`` writes a
table's current shape into one set's queue (set create, set update, cluster
upgrade); ``remove`` tells a set's consumers that a table left the set. Every
one of them runs inside the two-phase change, so the stream shows it exactly
where the change committed.
"""

from __future__ import annotations

from importlib import resources

from psycopg2 import sql

from pgshovel.cluster import names

STATEMENT_SEPARATOR = "\n-- statement\n"

_TABLE_OID = sql.SQL(
    "(SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
    "ON n.oid = c.relnamespace WHERE n.nspname = {} AND c.relname = {})"
)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")


def statements(cluster: str) -> list[sql.Composable]:
    """Create or replace the schema history, its functions and the two event triggers."""
    text = resources.files("pgshovel._sql").joinpath("schema.sql").read_text(encoding="utf-8")
    body = text[text.index("CREATE TABLE") :]
    prefix = names.trigger_prefix(cluster)
    values = {
        "schema": sql.Identifier(names.schema_name(cluster)),
        "triggers": sql.Literal(_like_escape(prefix) + "%"),
        "trigger_prefix": sql.Literal(prefix),
        "queues": sql.Literal(names.queue_prefix(cluster)),
        "ddl_trigger": sql.Identifier(names.ddl_trigger_name(cluster)),
        "drop_trigger": sql.Identifier(names.drop_trigger_name(cluster)),
        "rewrite_trigger": sql.Identifier(names.rewrite_trigger_name(cluster)),
        "rewrites": sql.Literal(names.rewrites_setting(cluster)),
    }
    return [
        sql.SQL(statement.strip()).format(**values)
        for statement in body.split(STATEMENT_SEPARATOR)
        if statement.strip()
    ]


def forget(cluster: str, set_name: str) -> sql.Composable:
    """Remove what the schema history holds for the set's queue (from an earlier set of that
    name): the event triggers read it to tell which names the set captures."""
    return sql.SQL("DELETE FROM {} WHERE queue = {}").format(
        sql.Identifier(names.schema_name(cluster), "schema_history"),
        sql.Literal(names.queue_name(cluster, set_name)),
    )


def announce(cluster: str, set_name: str, schema: str, table: str, command: str) -> sql.Composable:
    """Write the table's current shape into the set's queue (after its triggers are installed)."""
    return sql.SQL("SELECT {}.announce({}, 'announce', {}, false, false, {})").format(
        sql.Identifier(names.schema_name(cluster)),
        _TABLE_OID.format(sql.Literal(schema), sql.Literal(table)),
        sql.Literal(command),
        sql.Literal(names.queue_name(cluster, set_name)),
    )


def remove(
    cluster: str, set_name: str, version: str, schema: str, table: str, command: str
) -> sql.Composable:
    """Tell the set's consumers that the table is no longer part of the set."""
    return sql.SQL("SELECT {}.remove({}, {}, {}, {}, 'remove', {})").format(
        sql.Identifier(names.schema_name(cluster)),
        sql.Literal(names.queue_name(cluster, set_name)),
        sql.Literal(version),
        sql.Literal(schema),
        sql.Literal(table),
        sql.Literal(command),
    )
