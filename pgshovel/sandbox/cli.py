"""``pgshovel-sandbox up | down | status | env | spark``: the local stack from the command line.

The state directory comes from ``--state-dir`` or ``PGSHOVEL_SANDBOX_DIR``,
else from the rule in :mod:`pgshovel.sandbox._locate` (the nearest
``.sandbox``, or the sandbox ``up`` recorded for the current directory or a
parent); ``status``, ``env`` and ``down`` say which one they act on and how it
was found. ``eval "$(pgshovel-sandbox env)"`` points every pgshovel command and
configuration at the running sandbox. ``down`` keeps the data and says where
it is and how large (``--purge`` deletes it).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pgshovel import _cli
from pgshovel.errors import SandboxError
from pgshovel.sandbox import _lifecycle, _locate, _servers, _spark, _state
from pgshovel.sandbox._connection import shell_exports
from pgshovel.sandbox._spark_plan import DEFAULT_WORKER_CORES, DEFAULT_WORKER_MEMORY

F = TypeVar("F", bound=Callable[..., Any])

STATE_DIR_HELP = (
    "Directory holding the servers' data, logs and sandbox.json. Env: PGSHOVEL_SANDBOX_DIR. "
    "Default: the nearest .sandbox holding a sandbox.json in the current directory or a "
    "parent{fallback}."
)


def state_dir_option(fallback: str) -> Callable[[F], F]:
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        envvar="PGSHOVEL_SANDBOX_DIR",
        help=STATE_DIR_HELP.format(fallback=fallback),
    )


#: ``up`` creates the sandbox where it is run; the others find the one it recorded there.
up_state_dir = state_dir_option(", else ./.sandbox")
existing_state_dir = state_dir_option(
    " (or the sandbox 'up' recorded for it, in "
    "${XDG_STATE_HOME:-~/.local/state}/pgshovel/sandboxes)"
)


@click.group()
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="Logging level. Env: PGSHOVEL_LOG_LEVEL.",
)
@_cli.version_option
def sandbox(log_level: str) -> None:
    """Local PostgreSQL (with PgQ), ZooKeeper and Kafka (and, on request, a Spark
    standalone cluster) for demos and tests.

    Every command acts on the sandbox in --state-dir (env PGSHOVEL_SANDBOX_DIR)
    if given, else on the nearest .sandbox directory holding a sandbox.json in
    the current directory or one of its parents, or the sandbox 'up' recorded
    for one of them ('up --state-dir DIR' run there). Failing that, 'up'
    creates ./.sandbox; the other commands stop with the sandboxes recorded for
    other directories, never picking one of them.
    """
    _cli.configure_logging(log_level)


@sandbox.command()
@up_state_dir
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=_lifecycle.DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each service to answer.",
)
@click.option(
    "--spark-workers",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Also run a Spark standalone cluster (a Master and this many Workers, from the pyspark "
    "package's jars) on 127.0.0.1; on a running sandbox, start, resize or repair it. 0 leaves "
    "the cluster as it is (none unless started before).",
)
@click.option(
    "--spark-worker-cores",
    type=click.IntRange(min=1),
    default=DEFAULT_WORKER_CORES,
    show_default=True,
    help="Cores each Spark worker offers.",
)
@click.option(
    "--spark-worker-memory",
    default=DEFAULT_WORKER_MEMORY,
    show_default=True,
    help="Memory each Spark worker offers to executors (512m, 2g, ...); an application's "
    "spark.executor.memory (default 1g) must fit.",
)
def up(
    state_dir: Path | None,
    timeout: float,
    spark_workers: int,
    spark_worker_cores: int,
    spark_worker_memory: str,
) -> None:
    """Start the stack (or confirm it runs); recovers from a crashed previous run.

    With --spark-workers N, also a Spark standalone cluster: its master URL is
    printed, recorded in sandbox.json and exported by 'env' as
    PGSHOVEL_SPARK_MASTER (spark.master in replication.yml). 'spark down' stops
    only the cluster, 'down' everything.
    """
    directory = _locate.for_up(state_dir)
    connection = _lifecycle.start(directory, timeout=timeout)
    _locate.remember(directory)
    if spark_workers:
        _spark.start(
            directory, spark_workers, spark_worker_cores, spark_worker_memory, timeout=timeout
        )
        connection = _state.load(directory)  # now naming the master
    click.echo(f"sandbox running in {connection.state_dir}")
    click.echo(f"  postgresql  {connection.postgres_dsn}")
    click.echo(f"  zookeeper   {connection.zookeeper_hosts}")
    click.echo(f"  kafka       {connection.kafka_bootstrap_servers}")
    if connection.spark_master:
        click.echo(f"  spark       {connection.spark_master}")
    click.echo('use it from a shell with: eval "$(pgshovel-sandbox env)"')


@sandbox.command()
@existing_state_dir
@click.option(
    "--purge",
    is_flag=True,
    help="Also delete the state directory and all data (PostgreSQL's too, where it lives "
    "outside it).",
)
def down(state_dir: Path | None, purge: bool) -> None:
    """Stop every process of the stack; safe to repeat.

    The data stays, so 'up' starts the sandbox again as it was: 'down' says
    where and how much (as root, PostgreSQL's data lives under the postgres
    user's home when that user cannot enter the state directory). --purge
    deletes all of it.
    """
    try:
        located = _locate.locate_existing(state_dir)
    except SandboxError as error:
        click.echo(f"nothing to stop: {error}")
        return
    directory = located.state_dir
    if not directory.is_dir():
        click.echo(f"nothing to stop: no sandbox in {str(directory)!r}")
        return
    places = _lifecycle.data(directory)
    _lifecycle.stop(directory, purge=purge)
    if purge:
        _locate.forget(directory)
        deleted = " and ".join(repr(str(place.path)) for place in places)
        click.echo(f"{located.describe()} purged: deleted {deleted}")
        return
    click.echo(f"{located.describe()} stopped")
    click.echo(f"its data stays: {_describe_data(_lifecycle.data(directory))}")
    quoted = shlex.quote(str(directory))
    click.echo(
        f"'{_restart_command(directory)}' starts it again with its data; "
        f"'pgshovel-sandbox down --purge --state-dir {quoted}' deletes it"
    )


def _describe_data(places: list[_lifecycle.DataPlace]) -> str:
    """``12.3 MB in '/p/.sandbox', 97.0 MB of PostgreSQL's in '/var/lib/...' (...)``."""
    parts = []
    for place in places:
        size = f"{place.size / 1e6:.1f} MB"
        if place.outside:
            parts.append(
                f"{size} of PostgreSQL's in {str(place.path)!r} (outside the state directory, "
                "which its server user cannot enter)"
            )
        else:
            parts.append(f"{size} in {str(place.path)!r}")
    return ", ".join(parts) or "none"


@sandbox.command()
@existing_state_dir
def status(state_dir: Path | None) -> None:
    """Say which sandbox (state directory) and how it was found, then each service's PID,
    port and whether it runs, and where its data is; exit 1 if any service is down."""
    located = _locate.locate_existing(state_dir)
    state_dir = located.state_dir
    click.echo(located.describe())
    report = _lifecycle.status(state_dir)
    for service in report:
        state = "running" if service.running else "down"
        click.echo(f"{service.name:<14} pid={service.pid} port={service.port} {state}")
    click.echo(f"data: {_describe_data(_lifecycle.data(state_dir))}")
    down = [service.name for service in report if not service.running]
    if down:
        raise SandboxError(
            f"sandbox in {str(state_dir)!r} is not running: {', '.join(down)} down; "
            f"start it with {_restart_command(state_dir)!r}"
        )


@sandbox.command()
@existing_state_dir
def env(state_dir: Path | None) -> None:
    """Print shell exports (PGSHOVEL_*) for the running sandbox (which one: on stderr)."""
    located = _locate.locate_existing(state_dir)
    state_dir = located.state_dir
    click.echo(f"pgshovel-sandbox env: {located.describe()}", err=True)
    down = [service.name for service in _lifecycle.status(state_dir) if not service.running]
    if down:
        raise SandboxError(
            f"sandbox in {str(state_dir)!r} is not running ({', '.join(down)} down): "
            f"start it with {_restart_command(state_dir)!r}"
        )
    click.echo(shell_exports(_state.load(state_dir).environment()), nl=False)


def _restart_command(state_dir: Path) -> str:
    """The ``up`` that brings back everything the sandbox recorded, its Spark cluster too."""
    command = f"pgshovel-sandbox up --state-dir {shlex.quote(str(state_dir))}"
    try:
        cluster = _spark.load(state_dir)
    except SandboxError:
        return command
    if cluster is None:
        return command
    return (
        f"{command} --spark-workers {len(cluster.workers)} "
        f"--spark-worker-cores {cluster.cores} --spark-worker-memory {cluster.memory}"
    )


@sandbox.group()
def spark() -> None:
    """The sandbox's Spark standalone cluster ('up --spark-workers N' starts it)."""


@spark.command("down")
@existing_state_dir
def spark_down(state_dir: Path | None) -> None:
    """Stop the Spark cluster only (workers, then the master); safe to repeat."""
    directory = _locate.for_existing(state_dir)
    _spark.stop(directory)
    click.echo(f"spark cluster of the sandbox in {directory} stopped")


@spark.command("kill-worker")
@existing_state_dir
@click.argument("name")
def spark_kill_worker(state_dir: Path | None, name: str) -> None:
    """kill -9 of Spark worker NAME (worker-1, ...) and its executors, as a crash would.

    A running application's driver loses the executor and runs its tasks again
    on the other workers; 'up --spark-workers N' starts a replacement.
    """
    directory = _locate.for_existing(state_dir)
    process = _spark.kill_worker(directory, name)
    click.echo(f"killed spark {name} (pid {process.pid}) and its executors")


@sandbox.command()
@existing_state_dir
@click.option("--name", default="standby", show_default=True, help="The standby's name.")
def standby(state_dir: Path | None, name: str) -> None:
    """Start a streaming physical standby of the sandbox's PostgreSQL (pg_basebackup).

    It runs on a free port beside the sandbox, with cluster_name NAME (how
    pg_stat_replication and a relay's standbys: setting name it), until 'down'.
    """
    state_dir = _locate.for_existing(state_dir)
    primary = _state.load(state_dir)
    server = _servers.start_server(state_dir, name, primary_port=primary.ports["postgres"])
    click.echo(f"standby {name!r} running: {server.dsn()}")


@sandbox.command()
@existing_state_dir
@click.option("--name", default="standby", show_default=True, help="The standby to promote.")
def promote(state_dir: Path | None, name: str) -> None:
    """Promote a standby started by 'standby': it leaves recovery and accepts writes."""
    state_dir = _locate.for_existing(state_dir)
    server = _servers.servers(state_dir).get(name)
    if server is None:
        raise SandboxError(f"no standby named {name!r}: start one with 'pgshovel-sandbox standby'")
    server.promote()
    click.echo(f"{name!r} promoted: {server.dsn()}")


def main() -> None:
    _cli.run(sandbox)


if __name__ == "__main__":
    main()
