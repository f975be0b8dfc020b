"""The captures of pgbench's four tables that the capture group compares, with their consumers.

Each capture is a context manager that installs itself on the scratch
database, starts its consumer, and removes both when the block ends (on errors
too), so every run starts from an empty queue or a new slot:

- ``none``: no capture, the baseline;
- ``pgshovel``: pgshovel's triggers, installed with the same SQL
  ``pgshovel-admin set create`` runs (without ZooKeeper), packing with the
  defaults, pgbench_history captured unkeyed; ``pgshovel-unpacked`` the same with
  packing off (a queue row per change, as before packing); ``pgshovel-no-ddl``
  the same as ``pgshovel`` with its two schema event triggers disabled;
  ``pgshovel-row`` the same C library with a row trigger on every table, as
  before statement triggers (what a table in an inheritance tree still gets);
  ``pgshovel-provenance`` the same C library with provenance on every table
  (README "Provenance");
- ``trigger-bound``: pgshovel's triggers exactly as ``pgshovel`` installs them,
  their function replaced by the library's ``pgshovel_capture_nothing``, which
  returns at once: what PostgreSQL's firing of those triggers costs the writer
  (after-trigger queue, transition tables, the SECURITY DEFINER call) before any
  capture work, so the least any capture through these triggers can cost;
- ``jsontriga``: PgQ's own C trigger ``pgq.jsontriga``, a reference;
- ``floor``: the cheapest trigger-and-queue capture there is, a PL/pgSQL row
  trigger that inserts one constant event; what any trigger capture costs;
- ``logical``: no trigger, a wal2json logical replication slot; the peer that
  reads the WAL after the fact.

The PgQ captures are drained by a consumer thread, the slot by
``pg_recvlogical`` (see :mod:`bench._drain`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from psycopg2 import sql
from psycopg2.extensions import connection

from bench._drain import logical_drain, pgq_drain
from pgshovel.admin import capture_library, install
from pgshovel.cluster import names
from pgshovel.inspection import catalog
from pgshovel.protocol import configuration_pb2
from pgshovel.source import Catalog

CLUSTER = "benchcapture"
SET = "pgbench"
TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
JSONTRIGA_QUEUE = "bench_jsontriga"
FLOOR_QUEUE = "bench_floor"
FLOOR_FUNCTION = "bench_capture_floor"
SLOT = "bench_wal2json"
PLUGIN = "wal2json"
#: the C library's trigger function that captures nothing (trigger-bound)
NOTHING = "pgshovel_capture_nothing"

#: A capture's context manager: (autocommit connection to the scratch database, its DSN, workdir).
Capture = Callable[[connection, str, Path], AbstractContextManager[None]]


def _run(conn: connection, statements: list[sql.Composable]) -> None:
    with conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


#: what set create installs for a set whose file leaves packing out
PACKING = install.packing_argument(configuration_pb2.ReplicationSetConfiguration())


def _install_pgshovel(
    conn: connection,
    implementation: capture_library.Implementation,
    row_triggers: bool = False,
    provenance: bool = False,
    packing: str = PACKING,
) -> None:
    if implementation == "c" and not capture_library.serves(capture_library.library_version(conn)):
        raise RuntimeError("the C capture library is not installed (make setup runs make ext)")
    statements = [
        *install.base_statements(CLUSTER, catalog.extension_schema(conn, "hstore"), implementation),
        install.create_queue(CLUSTER, SET),
    ]
    version = "0123456789abcdef"
    for table in TABLES:
        info = Catalog(conn).table("public", table)
        if info is None:
            raise RuntimeError(f"pgbench -i did not create {table!r}; is pgbench 15 installed?")
        capture = install.TableCapture(
            "public",
            table,
            info.primary_key,
            (),
            "the bench asks" if row_triggers else "",
            provenance,
            packing,
        )
        statements += install.install_triggers(CLUSTER, SET, version, capture)
    _run(conn, statements)


def _remove_pgshovel(conn: connection) -> None:
    statements: list[sql.Composable] = []
    for table in TABLES:
        statements += install.drop_triggers(CLUSTER, SET, "public", table)
    statements.append(install.drop_queue(CLUSTER, SET))
    _run(conn, statements)


def _event_triggers(conn: connection, state: str) -> None:
    _run(
        conn,
        [
            sql.SQL("ALTER EVENT TRIGGER {} " + state).format(sql.Identifier(name))
            for name in (names.ddl_trigger_name(CLUSTER), names.drop_trigger_name(CLUSTER))
        ],
    )


def _trigger_capture(conn: connection, queue: str, function: sql.Composable) -> None:
    """Create ``queue`` and a row trigger calling ``function`` (with the queue) on every table."""
    _run(
        conn,
        [
            sql.SQL("SELECT pgq.create_queue({})").format(sql.Literal(queue)),
            *(
                sql.SQL(
                    "CREATE TRIGGER bench_capture AFTER INSERT OR UPDATE OR DELETE ON {} "
                    "FOR EACH ROW EXECUTE FUNCTION {}({})"
                ).format(sql.Identifier("public", table), function, sql.Literal(queue))
                for table in TABLES
            ),
        ],
    )


def _remove_trigger_capture(conn: connection, queue: str) -> None:
    _run(
        conn,
        [
            *(
                sql.SQL("DROP TRIGGER IF EXISTS bench_capture ON {}").format(
                    sql.Identifier("public", table)
                )
                for table in TABLES
            ),
            sql.SQL("SELECT pgq.drop_queue({}, true)").format(sql.Literal(queue)),
        ],
    )


@contextmanager
def no_capture(conn: connection, dsn: str, workdir: Path) -> Iterator[None]:
    """The baseline: pgbench's tables as they are."""
    yield


@contextmanager
def _pgshovel(
    conn: connection,
    dsn: str,
    implementation: capture_library.Implementation,
    row_triggers: bool = False,
    provenance: bool = False,
    packing: str = PACKING,
) -> Iterator[None]:
    _install_pgshovel(conn, implementation, row_triggers, provenance, packing)
    try:
        with pgq_drain(dsn, names.queue_name(CLUSTER, SET)):
            yield
    finally:
        _remove_pgshovel(conn)


def pgshovel(conn: connection, dsn: str, workdir: Path) -> AbstractContextManager[None]:
    """pgshovel's capture as set create installs it with the C library (make ext)."""
    return _pgshovel(conn, dsn, "c")


def pgshovel_unpacked(conn: connection, dsn: str, workdir: Path) -> AbstractContextManager[None]:
    """pgshovel's C capture with packing off: a queue row per change, as before packing."""
    return _pgshovel(conn, dsn, "c", packing="")


def pgshovel_rows(conn: connection, dsn: str, workdir: Path) -> AbstractContextManager[None]:
    """pgshovel's C library called by row triggers: the capture before statement triggers."""
    return _pgshovel(conn, dsn, "c", row_triggers=True)


def pgshovel_provenance(conn: connection, dsn: str, workdir: Path) -> AbstractContextManager[None]:
    """pgshovel's C capture with provenance on every table."""
    return _pgshovel(conn, dsn, "c", provenance=True)


def pgshovel_plpgsql(conn: connection, dsn: str, workdir: Path) -> AbstractContextManager[None]:
    """pgshovel's PL/pgSQL capture, what a database without the C library gets."""
    return _pgshovel(conn, dsn, "plpgsql")


@contextmanager
def pgshovel_without_ddl(conn: connection, dsn: str, workdir: Path) -> Iterator[None]:
    """pgshovel with its schema event triggers disabled (they fire on DDL only)."""
    _install_pgshovel(conn, "c")
    try:
        _event_triggers(conn, "DISABLE")
        try:
            with pgq_drain(dsn, names.queue_name(CLUSTER, SET)):
                yield
        finally:
            _event_triggers(conn, "ENABLE")
    finally:
        _remove_pgshovel(conn)


@contextmanager
def trigger_bound(conn: connection, dsn: str, workdir: Path) -> Iterator[None]:
    """pgshovel's triggers calling a function that does nothing (no queue row, no consumer)."""
    _install_pgshovel(conn, "c")
    try:
        _run(conn, [install.c_capture_function(CLUSTER, NOTHING)])
        yield
    finally:
        # the real function back, as set create leaves it
        _run(conn, [install.c_capture_function(CLUSTER)])
        _remove_pgshovel(conn)


@contextmanager
def jsontriga(conn: connection, dsn: str, workdir: Path) -> Iterator[None]:
    _run(conn, [sql.SQL("CREATE EXTENSION IF NOT EXISTS pgq")])
    _trigger_capture(conn, JSONTRIGA_QUEUE, sql.SQL("pgq.jsontriga"))
    try:
        with pgq_drain(dsn, JSONTRIGA_QUEUE):
            yield
    finally:
        _remove_trigger_capture(conn, JSONTRIGA_QUEUE)


def _create_floor_function(conn: connection) -> None:
    _run(
        conn,
        [
            sql.SQL("CREATE EXTENSION IF NOT EXISTS pgq"),
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
                "BEGIN\n"
                "    PERFORM pgq.insert_event_raw(TG_ARGV[0], NULL, now(), NULL, NULL, 'x', '[]',"
                " NULL, NULL, NULL, NULL);\n"
                "    RETURN NULL;\n"
                "END\n"
                "$$"
            ).format(sql.Identifier("public", FLOOR_FUNCTION)),
        ],
    )


@contextmanager
def floor(conn: connection, dsn: str, workdir: Path) -> Iterator[None]:
    """One constant event per row from a PL/pgSQL trigger: the least a trigger capture costs."""
    _create_floor_function(conn)
    _trigger_capture(conn, FLOOR_QUEUE, sql.Identifier("public", FLOOR_FUNCTION))
    try:
        with pgq_drain(dsn, FLOOR_QUEUE):
            yield
    finally:
        _remove_trigger_capture(conn, FLOOR_QUEUE)


@contextmanager
def logical(conn: connection, dsn: str, workdir: Path) -> Iterator[None]:
    """A wal2json slot that pg_recvlogical streams while the block runs."""
    with logical_drain(conn, dsn, SLOT, PLUGIN, workdir / "pg_recvlogical.log"):
        yield


CAPTURES: dict[str, Capture] = {
    "none": no_capture,
    "pgshovel": pgshovel,
    "pgshovel-unpacked": pgshovel_unpacked,
    "pgshovel-row": pgshovel_rows,
    "pgshovel-provenance": pgshovel_provenance,
    "pgshovel-plpgsql": pgshovel_plpgsql,
    "pgshovel-no-ddl": pgshovel_without_ddl,
    "trigger-bound": trigger_bound,
    "jsontriga": jsontriga,
    "floor": floor,
    "logical": logical,
}
