"""pgshovel-admin: the command line that initializes clusters and manages replication sets.

Every command that changes something plans first (reading ZooKeeper and the
databases), then either prints the plan (``--dry-run``, nothing changes) or
applies it with two-phase commit. Errors end with a one-line reason and exit
status 1 (see ``pgshovel._cli.run``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click
from kazoo.client import KazooClient

from pgshovel._cli import GlobalOptions, global_options, make_global_options, run
from pgshovel.admin import (
    acls,
    failover,
    failover_identity,
    grants,
    inspect,
    planning,
    tail,
)
from pgshovel.admin import requests as admin_requests
from pgshovel.admin import wait as set_waiting
from pgshovel.admin.connections import Connections
from pgshovel.admin.plan import Plan, render
from pgshovel.admin.twophase import execute
from pgshovel.cluster import names, requests, security, zookeeper
from pgshovel.cluster.requests import Result
from pgshovel.cluster.sets import load_set_configuration
from pgshovel.errors import NoSuchTransaction
from pgshovel.inspection import catalog
from pgshovel.protocol.configuration_pb2 import ReplicationSetConfiguration as SetConfiguration

dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Print the plan (ZooKeeper changes) only."
)
plan_dry_run_option = click.option(
    "--dry-run",
    is_flag=True,
    help="Print a summary of the plan only: tables added, changed, removed with their "
    "triggers, grants, statements per database, ZooKeeper changes.",
)
sql_option = click.option(
    "--sql", "show_sql", is_flag=True, help="With --dry-run: print every SQL statement too."
)


def plan_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--dry-run`` (a summary) and ``--sql`` (the plan's statements too)."""
    return plan_dry_run_option(sql_option(command))


def _apply(
    options: GlobalOptions,
    build: Callable[[planning.Context], Plan],
    dry_run: bool,
    show_sql: bool = False,
) -> None:
    _refuse_sql_without_dry_run(dry_run, show_sql)
    with zookeeper.connect(options.zookeeper_hosts) as client, Connections() as connections:
        context = planning.Context(
            options.cluster, zookeeper.ClusterStore(client, options.cluster), connections
        )
        _carry_out(build(context), client, connections, dry_run, show_sql)


def _refuse_sql_without_dry_run(dry_run: bool, show_sql: bool) -> None:
    if show_sql and not dry_run:
        raise click.UsageError("--sql prints the statements of a plan: add --dry-run")


def _carry_out(
    plan: Plan,
    client: KazooClient,
    connections: Connections,
    dry_run: bool,
    show_sql: bool = False,
) -> None:
    """Print the plan (``dry_run``; its statements with ``show_sql``) or apply it."""
    if dry_run:
        click.echo(
            render(
                plan,
                lambda dsn, statement: statement.as_string(connections.get(dsn)),
                statements=show_sql,
            )
        )
        if plan.databases and not show_sql:
            click.echo("sql: add --sql to print the statements")
        click.echo("dry run: nothing was changed")
        return
    execute(plan, connections, client)
    click.echo(f"done: {plan.summary}")


def _report(options: GlobalOptions, report: Callable[[planning.Context], str]) -> None:
    with zookeeper.connect(options.zookeeper_hosts) as client, Connections() as connections:
        context = planning.Context(
            options.cluster, zookeeper.ClusterStore(client, options.cluster), connections
        )
        click.echo(report(context))


@click.group()
@global_options
@click.pass_context
def cli(
    context: click.Context, cluster: str, zookeeper_hosts: str, log_level: str, debug: bool
) -> None:
    """Administer a pgshovel cluster and its replication sets."""
    names.validate_cluster_name(cluster)
    context.obj = make_global_options(cluster, zookeeper_hosts, log_level, debug)


@cli.group("cluster")
def cluster_group() -> None:
    """Initialize, inspect, upgrade and secure the cluster."""


@cluster_group.command("initialize")
@dry_run_option
@click.pass_obj
def cluster_initialize(options: GlobalOptions, dry_run: bool) -> None:
    """Create the cluster's ZooKeeper nodes."""
    _apply(options, planning.plan_cluster_initialize, dry_run)


@cluster_group.command("inspect")
@click.pass_obj
def cluster_inspect(options: GlobalOptions) -> None:
    """Show the cluster's version and its sets."""
    _report(options, inspect.describe_cluster)


@cluster_group.command("upgrade")
@click.option("--force", is_flag=True, help="Allow installing an older pgshovel over a newer one.")
@plan_options
@click.pass_obj
def cluster_upgrade(options: GlobalOptions, force: bool, dry_run: bool, show_sql: bool) -> None:
    """Reinstall the capture function in every set's database."""
    _apply(
        options,
        lambda context: planning.plan_cluster_upgrade(context, force=force),
        dry_run,
        show_sql,
    )


@cluster_group.command("secure")
@dry_run_option
@click.pass_obj
def cluster_secure(options: GlobalOptions, dry_run: bool) -> None:
    """Give every ZooKeeper node of the cluster this process's ACL.

    For a cluster created without credentials: with PGSHOVEL_ZOOKEEPER_AUTH
    set, its nodes become creator-only (or take PGSHOVEL_ZOOKEEPER_ACL). Stop
    its relays and workers first; start them again with the same credentials.
    """
    with zookeeper.connect(options.zookeeper_hosts) as client:
        nodes = acls.secure_cluster(client, options.cluster, dry_run=dry_run)
    acl = acls.describe(security.from_environment().acl)
    click.echo("\n".join(nodes))
    if dry_run:
        click.echo(f"dry run: would set ACL {acl} on {len(nodes)} node(s)")
    else:
        click.echo(f"done: ACL {acl} on {len(nodes)} node(s)")


@cli.group("set")
def set_group() -> None:
    """Create, update, drop, list, inspect and tail replication sets."""


set_file = click.argument("file", type=click.Path(dir_okay=False, path_type=Path))


def _set_from_file(
    planner: Callable[[planning.Context, str, SetConfiguration], Plan], summary: str
) -> click.Command:
    """A ``set`` command that plans a change of set NAME from FILE."""

    @click.argument("name")
    @set_file
    @plan_options
    @click.pass_obj
    def command(
        options: GlobalOptions, name: str, file: Path, dry_run: bool, show_sql: bool
    ) -> None:
        names.validate_set_name(name)
        configuration = load_set_configuration(file)
        _apply(options, lambda context: planner(context, name, configuration), dry_run, show_sql)

    command.__doc__ = summary
    return command  # type: ignore[return-value]


set_create = set_group.command("create")(
    _set_from_file(
        planning.plan_set_create, "Install capture for a new set NAME described by FILE (YAML)."
    )
)
set_update = set_group.command("update")(
    _set_from_file(planning.plan_set_update, "Change set NAME to the configuration in FILE.")
)


@set_group.command("failover")
@click.argument("name")
@click.option(
    "--to",
    "new_dsn",
    required=True,
    metavar="DSN",
    help="The promoted standby of the set's database (or the standby to promote: --promote).",
)
@click.option(
    "--promote",
    is_flag=True,
    help="DSN is still a standby: move the relay off the old primary, fence it (see --fence), "
    "wait until the standby replayed everything, then promote it.",
)
@click.option(
    "--fence/--no-fence",
    default=True,
    show_default=True,
    help="With --promote: make the old primary read-only (ALTER SYSTEM SET "
    "default_transaction_read_only, needs a superuser) and wait for the transactions begun "
    "before, so writes may go on during the switchover. --no-fence: stop them yourself first.",
)
@click.option(
    "--accept-divergence",
    is_flag=True,
    help="The relay reported that the stream holds batches DSN never received: give DSN (also "
    "when the set points at it already) a new node id so its batches are not taken for "
    "those; then restart the relay and run 'set verify --repair' (and 'set resnapshot' of the "
    "tables without a key), as the relay's message lists them.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds to wait for the relay to leave, the standby to catch up, the promotion.",
)
@plan_options
@click.pass_obj
def set_failover(
    options: GlobalOptions,
    name: str,
    new_dsn: str,
    promote: bool,
    fence: bool,
    accept_divergence: bool,
    timeout: float,
    dry_run: bool,
    show_sql: bool,
) -> None:
    """Move set NAME to DSN, a physical standby of its database (see README "Source failover").

    Capture goes on there with the same queue, node id and batch ids; the relay
    and the worker follow without a restart. Refused, with the reason: a DSN
    that is not a physical copy of the set's database (another cluster, a
    CREATE DATABASE ... TEMPLATE clone), the set's database itself, and a
    promoted copy while the old primary still takes writes (fence or stop it
    first).
    """
    names.validate_set_name(name)
    _refuse_sql_without_dry_run(dry_run, show_sql)
    with zookeeper.connect(options.zookeeper_hosts) as client, Connections() as connections:
        context = planning.Context(
            options.cluster, zookeeper.ClusterStore(client, options.cluster), connections
        )
        old_dsn = context.store.read_set(name).value.database.dsn
        target = failover_identity.identity(
            context, name, new_dsn, promote=promote, accept_divergence=accept_divergence
        )
        if target.note:
            click.echo(f"note: {target.note}")
        if target.standby:
            if dry_run:
                click.echo(
                    "plan: point the set at the standby, wait for its relay to leave the old "
                    "primary, "
                    + ("fence the old primary, " if fence else "")
                    + "wait for the standby to replay the old primary's WAL, promote it, "
                    "then re-install the set's triggers there (nothing was changed)"
                )
                return
            failover.promote(
                context,
                name,
                new_dsn,
                timeout,
                moved=lambda dsn: failover.point_at(client, context, name, dsn),
                fenced=fence,
            )
            if fence:
                click.echo(
                    "the old primary is read-only (default_transaction_read_only); shut it "
                    "down, or ALTER SYSTEM RESET default_transaction_read_only there to undo"
                )
        plan = failover.plan_failover(context, name, new_dsn, old_dsn, accept_divergence)
        _carry_out(plan, client, connections, dry_run, show_sql)


@set_group.command("wait")
@click.argument("name")
@click.argument("txid", metavar="TXID")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds to wait.",
)
@click.pass_obj
def set_wait(options: GlobalOptions, name: str, txid: str, timeout: float) -> None:
    """Wait until source transaction TXID (txid_current()) is applied in every copy of NAME.

    \b
    Exit status:
      0  every running worker's copy holds it
      1  timed out (or another error, one line on stderr)
      2  the transaction rolled back in the source: it will never be applied
      3  TXID is no transaction the source gave (not 1 to 2^63-1, or in its future)
    2 and 3 come at once. A mistyped option is a usage error (exit 2, 'Usage:').
    """
    names.validate_set_name(name)
    try:
        number = set_waiting.parse_txid(txid)
        with zookeeper.connect(options.zookeeper_hosts) as client, Connections() as connections:
            store = zookeeper.ClusterStore(client, options.cluster)
            source = connections.get(store.read_set(name).value.database.dsn)
            status, message = set_waiting.wait(
                client, source, options.cluster, name, number, timeout
            )
    except NoSuchTransaction as error:
        click.echo(f"error: {error}", err=True)
        click.get_current_context().exit(set_waiting.NO_SUCH_TRANSACTION)
    click.echo(message)
    click.get_current_context().exit(status)


@set_group.command("drop")
@click.argument("name")
@plan_options
@click.pass_obj
def set_drop(options: GlobalOptions, name: str, dry_run: bool, show_sql: bool) -> None:
    """Remove set NAME: its triggers, its queue and its ZooKeeper node."""
    names.validate_set_name(name)
    _apply(options, lambda context: planning.plan_set_drop(context, name), dry_run, show_sql)


@set_group.command("list")
@click.pass_obj
def set_list(options: GlobalOptions) -> None:
    """List the sets: name, version, table count, database."""

    def report(context: planning.Context) -> str:
        return "\n".join(
            f"{item.name}\t{item.version}\t{item.tables} table(s)\t{item.database}"
            for item in inspect.list_sets(context)
        )

    _report(options, report)


@set_group.command("inspect")
@click.argument("name")
@click.pass_obj
def set_inspect(options: GlobalOptions, name: str) -> None:
    """Show set NAME: configuration, version and the state of its triggers."""
    names.validate_set_name(name)
    _report(options, lambda context: inspect.describe_set(context, name))


@set_group.command("grants")
@click.argument("name")
@click.option("--relay-role", metavar="ROLE", help="The role pgshovel-relay logs in as.")
@click.option("--worker-role", metavar="ROLE", help="The role pgshovel-replicate logs in as.")
@click.option(
    "--relay-reads-tables",
    is_flag=True,
    help="The relay snapshots table topics (table_topics.snapshot): it reads the set's tables "
    "and writes watermarks.",
)
@click.option(
    "--relay-waits-for-standbys",
    is_flag=True,
    help="The relay publishes failover-safe (standbys:): it reads pg_stat_replication.",
)
@click.pass_obj
def set_grants(
    options: GlobalOptions,
    name: str,
    relay_role: str | None,
    worker_role: str | None,
    relay_reads_tables: bool,
    relay_waits_for_standbys: bool,
) -> None:
    """Print the GRANTs a relay's and a worker's own roles need in set NAME's database.

    Run them there as a superuser; the roles must exist (CREATE ROLE ... LOGIN).
    Run them again after 'set update' adds tables: the worker reads every table
    of the set. Point relay.yml's and replication.yml's source_connection at
    the roles (for example "user=pgshovel_relay").
    """
    names.validate_set_name(name)
    if not relay_role and not worker_role:
        raise click.UsageError("give --relay-role, --worker-role or both")

    def report(context: planning.Context) -> str:
        configuration = context.store.read_set(name).value
        conn = context.connections.get(configuration.database.dsn)
        database = catalog.current_database(conn)
        statements = []
        if relay_role:
            statements += grants.relay_grants(options.cluster, database, relay_role)
            if relay_reads_tables:
                statements += grants.table_readers(configuration, relay_role)
                statements.append(grants.watermark_writer(options.cluster, relay_role))
            if relay_waits_for_standbys:
                statements.append(grants.standby_watcher(relay_role))
        if worker_role:
            statements += grants.worker_grants(
                options.cluster, configuration, database, worker_role
            )
        conn.rollback()
        return "\n".join(statement.as_string(conn) + ";" for statement in statements)

    _report(options, report)


@set_group.command("tail")
@click.argument("name")
@click.option(
    "--bootstrap-servers",
    envvar="PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS",
    required=True,
    help="Kafka bootstrap servers. Env: PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS.",
)
@click.option(
    "--kafka-property",
    "kafka_properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="A librdkafka consumer property (repeatable). PGSHOVEL_KAFKA_API_VERSION_REQUEST and "
    "PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK, when set, give defaults for those two.",
)
@click.option("--topic", default=None, help="Topic to read. Default: <cluster>.<set>.")
@click.option(
    "--offset",
    type=int,
    default=None,
    help="Start offset (one-partition topics). Default: the oldest held.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new batches.")
@click.option("--limit", type=int, default=None, help="Stop after this many lines.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["pgshovel", "debezium"]),
    default="pgshovel",
    show_default=True,
    help="pgshovel: one record per mutation or schema change; debezium: Debezium envelopes.",
)
@click.option(
    "--latest", is_flag=True, help="Start at the topic's end (with --follow: new batches only)."
)
@click.pass_obj
def set_tail(
    options: GlobalOptions,
    name: str,
    bootstrap_servers: str,
    kafka_properties: tuple[str, ...],
    topic: str | None,
    offset: int | None,
    follow: bool,
    limit: int | None,
    output_format: str,
    latest: bool,
) -> None:
    """Print set NAME's committed mutations from Kafka as JSON lines.

    One line per mutation with its batch, transaction, table, operation, key
    columns and old/new rows (values as typed JSON, see the README's JSON
    mapping) and, for a table captured with provenance, who made it, or with
    --format debezium one Debezium envelope per change. The stream is
    validated on the way: rolled-back and re-sent batches are not printed.
    """
    if latest and offset is not None:
        raise click.BadParameter("give --offset or --latest, not both", param_hint="--latest")
    names.validate_set_name(name)
    properties: dict[str, str] = {}
    for variable, key in (
        ("PGSHOVEL_KAFKA_API_VERSION_REQUEST", "api.version.request"),
        ("PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK", "broker.version.fallback"),
    ):
        if os.environ.get(variable):
            properties[key] = os.environ[variable]
    for item in kafka_properties:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise click.BadParameter(
                f"expected KEY=VALUE, got {item!r}", param_hint="--kafka-property"
            )
        properties[key] = value
    tail.tail(
        bootstrap_servers,
        topic or names.topic_name(options.cluster, name),
        properties,
        click.echo,
        offset=offset,
        follow=follow,
        limit=limit,
        format="debezium" if output_format == "debezium" else "pgshovel",
        latest=latest,
    )


table_arguments = click.argument("tables", nargs=-1, metavar="[TABLE]...")
timeout_option = click.option(
    "--timeout",
    type=float,
    default=3600.0,
    show_default=True,
    help="Seconds to wait for every copy's report (the work goes on after a timeout).",
)


def _ask(
    options: GlobalOptions, name: str, request: requests.Request, timeout: float
) -> dict[str, Result]:
    """Every running copy's answer, printed; a copy that failed or did not answer fails the
    command (after every report is printed)."""
    with zookeeper.connect(options.zookeeper_hosts) as client:
        submitted, answers = admin_requests.ask(client, options.cluster, name, request, timeout)
    click.echo(admin_requests.render(answers))
    silent = [copy for copy, result in answers.items() if result is None]
    if silent:
        raise click.ClickException(
            f"no report from the worker of {', '.join(silent)} within {timeout:g}s (request "
            f"{submitted}); is its pgshovel-replicate still running? The request stays queued"
        )
    refused = {
        copy: result for copy, result in answers.items() if result and result.status == "failed"
    }
    if refused:
        raise click.ClickException(
            f"request {submitted} failed: "
            + "; ".join(f"{copy}: {result.message}" for copy, result in refused.items())
        )
    return {copy: result for copy, result in answers.items() if result is not None}


@set_group.command("resnapshot")
@click.argument("name")
@table_arguments
@click.option(
    "--where",
    default="",
    help="Only rows this SQL boolean expression selects in the source (PostgreSQL target).",
)
@timeout_option
@click.pass_obj
def set_resnapshot(
    options: GlobalOptions, name: str, tables: tuple[str, ...], where: str, timeout: float
) -> None:
    """Ask set NAME's workers to copy TABLEs (default: all) again while streaming.

    TABLE is schema.table or table (in public). Every copy whose worker runs
    (each named by its target, e.g. postgresql:host:5432/db or parquet:/path)
    reads each table in key-range chunks between watermarks in the stream, so
    the copy stays exact while writes go on; the command waits for every
    copy's report, and fails at once when no worker of the set runs. --where
    copies only the rows a boolean expression of the captured columns selects,
    evaluated on the source alone (checked there before the request is written).
    """
    names.validate_set_name(name)
    request = requests.Request("resnapshot", admin_requests.parse_tables(tables), where)
    if where:
        with zookeeper.connect(options.zookeeper_hosts) as client:
            admin_requests.check_where(client, options.cluster, name, request)
    _ask(options, name, request, timeout)


@set_group.command("verify")
@click.argument("name")
@table_arguments
@click.option("--repair", is_flag=True, help="Copy the differing ranges again, then verify them.")
@timeout_option
@click.pass_obj
def set_verify(
    options: GlobalOptions, name: str, tables: tuple[str, ...], repair: bool, timeout: float
) -> None:
    """Compare set NAME's copies with the source by key-range checksums; exit 1 on a difference.

    TABLE is schema.table or table (in public). Checksums are computed inside
    each database, range by range between watermarks in the stream, so the
    comparison is exact while writes go on. Every copy whose worker runs
    answers under its target's name; the exit status is 1 when any copy
    differs, and the command fails at once when no worker of the set runs.
    """
    names.validate_set_name(name)
    request = requests.Request("verify", admin_requests.parse_tables(tables), repair=repair)
    answers = _ask(options, name, request, timeout)
    if any(admin_requests.differences_remain(result) for result in answers.values()):
        raise click.exceptions.Exit(1)


@cli.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. The console has no authentication of its own: bind "
    "elsewhere than loopback only behind a proxy that authenticates.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8640,
    show_default=True,
    help="Port to listen on (0: any free port; the URL is printed).",
)
@click.option(
    "--refresh",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Seconds between the pages' automatic refreshes.",
)
@click.pass_obj
def serve(options: GlobalOptions, host: str, port: int, refresh: int) -> None:
    """Serve a read-only web console of every cluster in ZooKeeper, with a JSON API.

    Pages show each set's tables, its relay (leader, standbys, epoch, backlog,
    lag), every copy (target, position, lag, snapshot / verify / resnapshot
    progress), the last errors, and lag and throughput charts of the last
    hour; /api/... serves the same as JSON. ZooKeeper is read with the
    credentials of PGSHOVEL_ZOOKEEPER_AUTH, each set's queue with its DSN.
    Needs the console extra (pip install 'pgshovel[console]'). Ctrl-C stops it.
    """
    from pgshovel.console import require_console

    require_console()
    from pgshovel.console.server import serve as serve_console

    serve_console(
        options.zookeeper_hosts,
        host,
        port,
        refresh,
        announce=lambda url: click.echo(f"console on {url} (read-only; Ctrl-C stops it)"),
    )


def main(argv: list[str] | None = None) -> None:
    """Console script entry point."""
    run(cli, argv)
