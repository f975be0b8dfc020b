"""``set resnapshot`` and ``set verify``: ask every copy's worker, wait, print each copy's report.

The request goes through ZooKeeper (``pgshovel.cluster.requests``), so the
command works wherever the workers run. It is addressed to the copies whose
workers run when it is made (their status nodes, ``pgshovel.replication.status``):
with none running it fails at once instead of waiting. Each copy answers on
its own and the report names it by its target (``postgresql:host:port/db``,
``parquet:/path``): per table, what was copied or compared; for a verify, every
range that differs, with the buckets that differ and the rows those buckets
hold on each side. ``verify`` exits 1 when differences remain in any copy.
A ``--where`` filter is checked before the request is written
(``check_where``: one read-only boolean expression of the captured columns,
parsed and planned by the source itself); the worker checks it again, since
anyone who may write in ZooKeeper may write a request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kazoo.client import KazooClient

from pgshovel.admin.connections import APPLICATION_NAME
from pgshovel.cluster import names, requests
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.requests import Request, Result
from pgshovel.cluster.zookeeper import ClusterStore
from pgshovel.errors import ConfigurationError, NotRunning
from pgshovel.inspection import activity
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


def render_result(result: Result, indent: str = "") -> list[str]:
    """One copy's report, a block per table."""
    lines = [f"{indent}status: {result.status}"]
    if result.message:
        lines.append(f"{indent}message: {result.message}")
    for table in result.tables:
        lines.append(
            f"{indent}{table.schema}.{table.table}: {table.purpose} of {table.ranges} range(s), "
            f"{table.rows} row(s)"
        )
        if table.purpose == "verify":
            if not table.differences:
                lines.append(f"{indent}  no difference")
            for index, lower, upper, source, copy, buckets in table.differences:
                lines.append(
                    f"{indent}  range {index} [{_bound(lower, '-inf')}, {_bound(upper, '+inf')}): "
                    f"{buckets} bucket(s) differ, holding {source} row(s) in the source and "
                    f"{copy} row(s) in the copy"
                )
    return lines


def render(answers: Mapping[str, Result | None]) -> str:
    """Every copy's report under its name; a copy without an answer says so."""
    lines = []
    for copy, result in answers.items():
        lines.append(f"copy {copy}:")
        if result is None:
            lines.append("  no report yet (the request stays queued for its worker)")
            continue
        lines += render_result(result, "  ")
    return "\n".join(lines)


def differences_remain(result: Result) -> bool:
    """Whether the last verify of some table found differences."""
    last: dict[tuple[str, str], bool] = {}
    for table in result.tables:
        if table.purpose == "verify":
            last[(table.schema, table.table)] = bool(table.differences)
    return any(last.values())


def running_copies(client: KazooClient, cluster: str, set_name: str) -> tuple[str, ...]:
    """The copies whose workers run now (their status nodes), each once."""
    copies = {
        str(worker.document.get("copy") or worker.document.get("target") or worker.name)
        for worker in activity.read_workers(client, cluster, set_name)
    }
    return tuple(sorted(copies))


def ask(
    client: KazooClient,
    cluster: str,
    set_name: str,
    request: Request,
    timeout: float,
) -> tuple[str, dict[str, Result | None]]:
    """Submit to the copies running now and wait; the request's name and each copy's answer
    (None for a copy that did not answer within ``timeout``)."""
    if client.exists(names.set_path(cluster, set_name)) is None:
        raise ConfigurationError(
            f"set {set_name!r} does not exist in cluster {cluster!r}; see 'pgshovel-admin set list'"
        )
    copies = running_copies(client, cluster, set_name)
    if not copies:
        raise NotRunning(
            f"no worker of set {set_name!r} is running, so no copy can answer; start "
            f"'pgshovel-replicate replication.yml {set_name}' and run this again"
        )
    name = requests.submit(client, cluster, set_name, replace(request, copies=copies))
    answers = requests.wait_copies(client, cluster, set_name, name, copies, timeout)
    return name, {copy: answers.get(copy) for copy in copies}


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
