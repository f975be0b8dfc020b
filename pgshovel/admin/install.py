"""The SQL that installs, updates and removes capture in a database.

Pure composition: every function returns ``psycopg2.sql`` statements and never
touches a database, so a plan can be printed (``--dry-run``) or executed in a
two-phase transaction. ``resolve_table`` checks a configured table against the
source catalog (``pgshovel.source.captured_shape``) and keeps what the triggers
need.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from psycopg2 import sql

from pgshovel.admin import capture_library, grants, schema_capture
from pgshovel.admin.capture_library import Implementation
from pgshovel.cluster import names
from pgshovel.cluster.sets import PACKING_BYTES, PACKING_ROWS
from pgshovel.errors import DatabaseError
from pgshovel.protocol import configuration_pb2
from pgshovel.source import NODE_TABLE, TableInfo, captured_shape

CAPTURE_FUNCTION = "capture"
#: the statement triggers' names: the set's trigger name and one of these (a '.', which no
#: set name holds, keeps them apart from every other set's triggers)
STATEMENT_TRIGGERS = {"INSERT": ".insert", "UPDATE": ".update", "DELETE": ".delete"}
#: TG_ARGV[4] of a table captured with provenance
PROVENANCE_ON = "1"
#: the transition tables they name (sql/capture.sql reads them by these names)
OLD_TABLE = "pgshovel_old"
NEW_TABLE = "pgshovel_new"


@dataclass(frozen=True)
class TableCapture:
    """A table as it will be captured: resolved key and captured columns."""

    schema: str
    name: str
    key_columns: tuple[str, ...]
    columns: tuple[str, ...]  # empty: every column, including ones added later
    #: row triggers instead of statement triggers: why (catalog.row_triggers_reason), or ""
    row_triggers: str = ""
    #: stamp each event with who made it (TG_ARGV[4] '1', see sql/capture.sql)
    provenance: bool = False
    #: pack changes into fewer queue rows: TG_ARGV[5] "ROWS,BYTES,copy" (``packing_argument``); ""
    #: writes one queue row per change, as before packing
    packing: str = ""


def resolve_table(
    table: configuration_pb2.TableConfiguration,
    info: TableInfo | None,
    *,
    allow_unkeyed: bool,
    database: str,
    row_triggers: str = "",
    packing: str = "",
) -> TableCapture:
    """Check a configured table against the catalog; ``database`` is a masked DSN."""
    shape = captured_shape(table, info, allow_unkeyed=allow_unkeyed, database=database)
    return TableCapture(
        table.schema,
        table.name,
        shape.key,
        tuple(table.columns),
        row_triggers,
        table.provenance,
        packing,
    )


def packing_argument(configuration: configuration_pb2.ReplicationSetConfiguration) -> str:
    """TG_ARGV[5] of the set's triggers, ``ROWS,BYTES,copy`` (ext/packing.c: packs whose
    changes without provenance are COPY lines), from its ``packing`` (unset: the
    defaults); "" when a row holds one change: no packing."""
    rows, size = PACKING_ROWS, PACKING_BYTES
    if configuration.HasField("packing"):
        rows, size = configuration.packing.rows, configuration.packing.bytes
    return "" if rows <= 1 else f"{rows},{size},copy"


def text_array_literal(values: Sequence[str]) -> str:
    """A PostgreSQL text[] literal for ``values``, every element quoted."""
    quoted = ('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values)
    return "{" + ",".join(quoted) + "}"


def c_capture_function(cluster: str, symbol: str = capture_library.LIBRARY) -> sql.Composable:
    """CREATE OR REPLACE the cluster's capture function as the C library's function
    ``symbol`` (the capture trigger; the bench's trigger bound names another)."""
    # No SET clauses: the C trigger pins the output settings itself, and only
    # when a session differs from them; every name it uses is schema-qualified.
    # The same spelling as sql/capture.sql: {schema}.capture().
    return sql.SQL(
        "CREATE OR REPLACE FUNCTION {}.capture() RETURNS trigger LANGUAGE c SECURITY DEFINER "
        "AS {}, {}"
    ).format(
        sql.Identifier(names.schema_name(cluster)),
        sql.Literal(capture_library.LIBRARY),
        sql.Literal(symbol),
    )


def capture_function(
    cluster: str, hstore_schema: str, implementation: Implementation = "plpgsql"
) -> sql.Composable:
    """CREATE OR REPLACE the cluster's capture function: the C trigger of
    ext/pgshovel_capture.c, or its PL/pgSQL twin (sql/capture.sql)."""
    if implementation == "c":
        return c_capture_function(cluster)
    if "$" in hstore_schema:
        # The function body is dollar-quoted; a '$' in this name could end it early.
        raise DatabaseError(
            f"the hstore extension is installed in schema {hstore_schema!r}, whose name "
            "contains '$'; move it (ALTER EXTENSION hstore SET SCHEMA ...) and retry"
        )
    text = resources.files("pgshovel._sql").joinpath("capture.sql").read_text(encoding="utf-8")
    statement = text[text.index("CREATE OR REPLACE FUNCTION") :].rstrip().rstrip(";")
    return sql.SQL(statement).format(
        schema=sql.Identifier(names.schema_name(cluster)),
        hstore=sql.Identifier(hstore_schema),
    )


def base_statements(
    cluster: str, hstore_schema: str | None, implementation: Implementation = "plpgsql"
) -> list[sql.Composable]:
    """PgQ, the cluster schema, hstore (into that schema when missing), node id, functions,
    the schema capture (history table, event triggers), and no EXECUTE for PUBLIC on the
    functions that run as their owner."""
    schema = sql.Identifier(names.schema_name(cluster))
    node = sql.Identifier(names.schema_name(cluster), NODE_TABLE)
    statements: list[sql.Composable] = [
        sql.SQL("CREATE EXTENSION IF NOT EXISTS pgq"),
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema),
    ]
    if hstore_schema is None:
        statements.append(sql.SQL("CREATE EXTENSION IF NOT EXISTS hstore SCHEMA {}").format(schema))
        hstore_schema = names.schema_name(cluster)
    statements += [
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id uuid NOT NULL, "
            "singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton))"
        ).format(node),
        sql.SQL(
            "INSERT INTO {} (id) VALUES (pg_catalog.gen_random_uuid()) ON CONFLICT DO NOTHING"
        ).format(node),
        capture_function(cluster, hstore_schema, implementation),
        *schema_capture.statements(cluster),
        *grants.revoke_statements(cluster),
    ]
    return statements


def create_queue(cluster: str, set_name: str) -> sql.Composable:
    """Create the set's queue and register the relay's consumer (both idempotent)."""
    queue = sql.Literal(names.queue_name(cluster, set_name))
    return sql.SQL("SELECT pgq.create_queue({}), pgq.register_consumer({}, {})").format(
        queue, queue, sql.Literal(names.CONSUMER)
    )


def drop_queue(cluster: str, set_name: str) -> sql.Composable:
    # force: a relay's consumer registration must not keep a dropped set's queue alive.
    return sql.SQL("SELECT pgq.drop_queue({}, true)").format(
        sql.Literal(names.queue_name(cluster, set_name))
    )


def trigger_arguments(cluster: str, set_name: str, version: str, table: TableCapture) -> list[str]:
    """The constant arguments of a table's triggers (see sql/capture.sql); the fifth, '1',
    only with provenance, the sixth only with packing, so the triggers of a table without
    them are those of before."""
    arguments = [
        names.queue_name(cluster, set_name),
        version,
        json.dumps(list(table.key_columns)),
        text_array_literal(table.columns) if table.columns else "",
    ]
    if table.provenance or table.packing:
        arguments.append(PROVENANCE_ON if table.provenance else "")
    if table.packing:
        arguments.append(table.packing)
    return arguments


def trigger_names(cluster: str, set_name: str) -> list[str]:
    """Every trigger a set may have on a table: the set's trigger, the statement triggers and
    the TRUNCATE trigger."""
    main = names.trigger_name(cluster, set_name)
    return [
        main,
        *(main + suffix for suffix in STATEMENT_TRIGGERS.values()),
        names.truncate_trigger_name(cluster, set_name),
    ]


def drop_triggers(cluster: str, set_name: str, schema: str, table: str) -> list[sql.Composable]:
    target = sql.Identifier(schema, table)
    return [
        sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(sql.Identifier(trigger), target)
        for trigger in trigger_names(cluster, set_name)
    ]


def install_triggers(
    cluster: str, set_name: str, version: str, table: TableCapture
) -> list[sql.Composable]:
    """Replace a table's triggers for this set and version.

    A plain table gets a statement trigger per event, with transition tables, and under
    the set's trigger name a row trigger that never fires (``AFTER DELETE ... WHEN
    (false)``, DELETE sharing the old rows the DELETE statement trigger keeps anyway): a
    row trigger with a transition table makes PostgreSQL refuse to make the table an
    inheritance child or a partition, whose rows a statement on the parent changes
    without firing the child's statement triggers, and it carries the set's arguments
    for the schema capture (``sql/schema.sql``) and ``set inspect``. A table in an
    inheritance tree, or with an AFTER trigger of its own, gets the row trigger as it is
    (``TableCapture.row_triggers``, see ``catalog.row_triggers_reason``). Both get the
    TRUNCATE trigger.
    """
    target = sql.Identifier(table.schema, table.name)
    function = sql.Identifier(names.schema_name(cluster), CAPTURE_FUNCTION)
    arguments = sql.SQL(", ").join(
        sql.Literal(argument) for argument in trigger_arguments(cluster, set_name, version, table)
    )
    main = names.trigger_name(cluster, set_name)
    statements = drop_triggers(cluster, set_name, table.schema, table.name)
    if table.row_triggers:
        update: sql.Composable = sql.SQL("UPDATE")
        if table.columns:
            update = sql.SQL("UPDATE OF {}").format(
                sql.SQL(", ").join(sql.Identifier(column) for column in table.columns)
            )
        statements.append(
            sql.SQL(
                "CREATE TRIGGER {} AFTER INSERT OR {} OR DELETE ON {} "
                "FOR EACH ROW EXECUTE FUNCTION {}({})"
            ).format(sql.Identifier(main), update, target, function, arguments)
        )
    else:
        old = sql.SQL("OLD TABLE AS {}").format(sql.Identifier(OLD_TABLE))
        new = sql.SQL("NEW TABLE AS {}").format(sql.Identifier(NEW_TABLE))
        statements.append(
            sql.SQL(
                "CREATE TRIGGER {} AFTER DELETE ON {} REFERENCING {} "
                "FOR EACH ROW WHEN (false) EXECUTE FUNCTION {}({})"
            ).format(sql.Identifier(main), target, old, function, arguments)
        )
        transition = {"INSERT": new, "UPDATE": sql.SQL("{} {}").format(old, new), "DELETE": old}
        for event, suffix in STATEMENT_TRIGGERS.items():
            statements.append(
                sql.SQL(
                    "CREATE TRIGGER {} AFTER {} ON {} REFERENCING {} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION {}({})"
                ).format(
                    sql.Identifier(main + suffix),
                    sql.SQL(event),
                    target,
                    transition[event],
                    function,
                    arguments,
                )
            )
    statements.append(
        sql.SQL(
            "CREATE TRIGGER {} AFTER TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION {}({})"
        ).format(
            sql.Identifier(names.truncate_trigger_name(cluster, set_name)),
            target,
            function,
            arguments,
        )
    )
    return statements
