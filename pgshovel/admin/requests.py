"""``set resnapshot`` and ``set verify``: ask the set's running worker, wait, print its report.

The request goes through ZooKeeper (``pgshovel.cluster.requests``), so the
command works wherever the worker runs. The report lists, per table, what was
copied or compared; for a verify, every range that differs with the rows
counted on each side. ``verify`` exits 1 when differences remain. A
``--where`` filter is checked before the request is written (``check_where``:
one read-only boolean expression of the captured columns, parsed and planned
by the source itself); the worker checks it again, since anyone who may write
in ZooKeeper may write a request.
"""

from __future__ import annotations

from collections.abc import Sequence

from kazoo.client import KazooClient

from pgshovel.admin.connections import APPLICATION_NAME
from pgshovel.cluster import requests
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.requests import Request, Result
from pgshovel.cluster.zookeeper import ClusterStore
from pgshovel.errors import ConfigurationError
from pgshovel.source import Catalog, captured_shape, check_filter, check_filter_text, connect


def parse_tables(tables: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``schema.table`` or ``table`` (in ``public``) names as pairs."""
    parsed = []
    for name in tables:
        schema, dot, table = name.rpartition(".")
        if not table:
            raise ConfigurationError(f"table {name!r}: expected 'schema.table' or 'table'")
        parsed.append((schema if dot else "public", table))
    return tuple(parsed)


def _bound(bound: Sequence[object] | None, missing: str) -> str:
    return missing if bound is None else "(" + ", ".join(str(v) for v in bound) + ")"


def render(result: Result) -> str:
    """The report, one table per block."""
    lines = [f"status: {result.status}"]
    if result.message:
        lines.append(f"message: {result.message}")
    for table in result.tables:
        lines.append(
            f"{table.schema}.{table.table}: {table.purpose} of {table.ranges} range(s), "
            f"{table.rows} row(s)"
        )
        if table.purpose == "verify":
            if not table.differences:
                lines.append("  no difference")
            for index, lower, upper, source, copy, buckets in table.differences:
                lines.append(
                    f"  range {index} [{_bound(lower, '-inf')}, {_bound(upper, '+inf')}): "
                    f"source {source} row(s), "
                    f"copy {copy} row(s), {buckets} bucket(s) differ"
                )
    return "\n".join(lines)


def differences_remain(result: Result) -> bool:
    """Whether the last verify of some table found differences."""
    last: dict[tuple[str, str], bool] = {}
    for table in result.tables:
        if table.purpose == "verify":
            last[(table.schema, table.table)] = bool(table.differences)
    return any(last.values())


def ask(
    client: KazooClient,
    cluster: str,
    set_name: str,
    request: Request,
    timeout: float,
) -> tuple[str, Result | None]:
    """Submit and wait; the request's name and its result (None when ``timeout`` passed)."""
    name = requests.submit(client, cluster, set_name, request)
    return name, requests.wait(client, cluster, set_name, name, timeout)


def check_where(client: KazooClient, cluster: str, set_name: str, request: Request) -> None:
    """Refuse a ``--where`` filter before the request is written: a ``ConfigurationError``
    naming the table and the cause unless, on every table asked for, the source parses and
    plans it as one boolean expression of the captured columns."""
    check_filter_text(request.where)
    configuration = ClusterStore(client, cluster).read_set(set_name).value
    configured = {(table.schema or "public", table.name): table for table in configuration.tables}
    missing = [".".join(name) for name in request.tables if name not in configured]
    if missing:
        raise ConfigurationError(f"table(s) {missing!r} are not tables of set {set_name!r}")
    dsn = configuration.database.dsn
    connection = connect(dsn, APPLICATION_NAME, autocommit=True)
    try:
        catalog = Catalog(connection)
        for name in request.tables or sorted(configured):
            shape = captured_shape(
                configured[name],
                catalog.table(*name),
                allow_unkeyed=configuration.allow_unkeyed,
                database=mask_dsn(dsn),
            )
            if not shape.key:
                raise ConfigurationError(
                    f"--where on {shape.qualified}: the table has no key, so the copy's rows "
                    "cannot be told apart by the source's; re-snapshot the whole table"
                )
            check_filter(connection, shape, request.where)
    finally:
        connection.close()
