"""What pgshovel-admin reads about a database's installation before planning a change.

Everything here only reads: settings, installed extensions, the set's queue and
the triggers a set installed. Tables, their columns and keys, and the node id
come from the one source catalog reader (``pgshovel.source``). Planning
(``pgshovel.admin.install``) turns these facts into statements.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg2.extensions import connection


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


def in_inheritance_tree(conn: connection, schema: str, table: str) -> bool:
    """Is the table an inheritance parent, child or partition (see install.TableCapture)?"""
    found = _one(
        conn,
        "SELECT 1 FROM pg_catalog.pg_inherits i "
        "JOIN pg_catalog.pg_class c ON c.oid IN (i.inhrelid, i.inhparent) "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s LIMIT 1",
        (schema, table),
    )
    return found is not None


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
