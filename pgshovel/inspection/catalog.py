"""What pgshovel-admin reads about a database's installation before planning a change.

Everything here only reads: settings, installed extensions, the set's queue and
the triggers a set installed. Tables, their columns and keys, and the node id
come from the one source catalog reader (``pgshovel.source``). Planning
(``pgshovel.admin.install``) turns these facts into statements.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg2 import sql
from psycopg2.extensions import connection

from pgshovel.cluster import names


@dataclass(frozen=True)
class InstalledTrigger:
    """A pgshovel trigger found on a table, with the arguments it was created with."""

    name: str
    arguments: tuple[str, ...]
    enabled: bool


def _one(conn: connection, query: str, args: tuple[object, ...] = ()) -> object:
    with conn.cursor() as cursor:
        cursor.execute(query, args)
        row = cursor.fetchone()
    return None if row is None else row[0]


def current_database(conn: connection) -> str:
    return str(_one(conn, "SELECT pg_catalog.current_database()"))


def max_prepared_transactions(conn: connection) -> int:
    return int(str(_one(conn, "SHOW max_prepared_transactions")))


def extension_schema(conn: connection, extension: str) -> str | None:
    """The schema an extension is installed in, or None when it is not installed."""
    found = _one(
        conn,
        "SELECT n.nspname FROM pg_catalog.pg_extension e "
        "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = %s",
        (extension,),
    )
    return None if found is None else str(found)


def extension_available(conn: connection, extension: str) -> bool:
    found = _one(
        conn, "SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = %s", (extension,)
    )
    return found is not None


def schema_exists(conn: connection, schema: str) -> bool:
    found = _one(conn, "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", (schema,))
    return found is not None


def row_triggers_reason(conn: connection, schema: str, table: str) -> str | None:
    """Why the table must be captured by row triggers, or None: statement triggers can.

    In an inheritance tree (a parent, a child, a partition), statement triggers miss or
    mix up rows; a trigger of its own that fires after its rows change (not PostgreSQL's
    internal ones, such as foreign keys', nor a pgshovel capture function) may change
    its rows again before a statement trigger writes the statement's events, which then
    come after the later change. See install.install_triggers.
    """
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i "
            "  WHERE c.oid IN (i.inhrelid, i.inhparent)), "
            "(SELECT t.tgname FROM pg_catalog.pg_trigger t "
            "  JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid "
            "  JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace "
            "  WHERE t.tgrelid = c.oid AND NOT t.tgisinternal "
            # AFTER (not BEFORE: 2, not INSTEAD OF: 64) on INSERT (4), DELETE (8), UPDATE (16)
            "  AND t.tgtype & 66 = 0 AND t.tgtype & 28 <> 0 "
            "  AND NOT (p.proname = 'capture' AND pn.nspname LIKE 'pgshovel\\_%%') "
            "  ORDER BY t.tgname LIMIT 1) "
            "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (schema, table),
        )
        found = cursor.fetchone()
    if found is None:
        return None
    inherits, trigger = found
    if inherits:
        return "it is in an inheritance tree"
    if trigger is not None:
        return f"its trigger {trigger!r} fires after its rows change"
    return None


def queue_exists(conn: connection, queue: str) -> bool:
    if extension_schema(conn, "pgq") is None:
        return False
    found = _one(conn, "SELECT 1 FROM pgq.queue WHERE queue_name = %s", (queue,))
    return found is not None


def installed_triggers(conn: connection, schema: str, table: str) -> dict[str, InstalledTrigger]:
    """Every pgshovel trigger on a table by name (empty when the table does not exist)."""
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT t.tgname, t.tgargs, t.tgenabled <> 'D' FROM pg_catalog.pg_trigger t "
            "JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND t.tgname LIKE 'pgshovel\\_%%' "
            "AND NOT t.tgisinternal",
            (schema, table),
        )
        rows = cursor.fetchall()
    found = {}
    for name, raw_arguments, enabled in rows:
        # tgargs holds each argument followed by a NUL byte.
        arguments = tuple(part.decode("utf-8") for part in bytes(raw_arguments).split(b"\x00")[:-1])
        found[name] = InstalledTrigger(name=name, arguments=arguments, enabled=bool(enabled))
    return found


@dataclass(frozen=True)
class LastSchemaEvent:
    """The last schema event a set's queue got under a table's name (sql/schema.sql)."""

    relation: int
    kind: str
    #: another table took the name without the set's triggers (schema.sql's claim)
    uncaptured: bool


def last_schema_event(
    conn: connection, cluster: str, queue: str, schema: str, table: str
) -> LastSchemaEvent | None:
    """The last schema event the queue got under the name ``schema.table`` (None: none, or
    no schema history installed)."""
    history = sql.Identifier(names.schema_name(cluster), "schema_history")
    with conn.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (history.as_string(cursor),))
        row = cursor.fetchone()
        if row is None or not row[0]:
            return None
        cursor.execute(
            sql.SQL(
                "SELECT relation, data::json->>'kind', "
                "coalesce((data::json->>'uncaptured')::boolean, false) FROM {} "
                "WHERE queue = %s AND table_schema = %s AND table_name = %s "
                "ORDER BY event_id DESC LIMIT 1"
            ).format(history),
            (queue, schema, table),
        )
        found = cursor.fetchone()
    return None if found is None else LastSchemaEvent(int(found[0]), str(found[1]), found[2])


def table_name(conn: connection, relation: int) -> tuple[str, str] | None:
    """The schema and name of the ordinary table with oid ``relation`` (None: there is none)."""
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = %s AND c.relkind = 'r'",
            (relation,),
        )
        found = cursor.fetchone()
    return None if found is None else (str(found[0]), str(found[1]))
