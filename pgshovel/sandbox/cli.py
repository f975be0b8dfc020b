"""``pgshovel-sandbox up | down | status | env``: the local stack from the command line.

The state directory comes from ``--state-dir`` or ``PGSHOVEL_SANDBOX_DIR`` and
defaults to ``.sandbox``. ``eval "$(pgshovel-sandbox env)"`` points every
pgshovel command and configuration at the running sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pgshovel import _cli
from pgshovel.errors import SandboxError
from pgshovel.sandbox import _lifecycle
from pgshovel.sandbox._connection import shell_exports

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_STATE_DIR = ".sandbox"


def state_dir_option(command: F) -> F:
    option = click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_STATE_DIR,
        show_default=True,
        envvar="PGSHOVEL_SANDBOX_DIR",
        help="Directory holding the servers' data, logs and sandbox.json. "
        "Env: PGSHOVEL_SANDBOX_DIR.",
    )
    return option(command)


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
    """Local PostgreSQL (with PgQ), ZooKeeper and Kafka for demos and tests."""
    _cli.configure_logging(log_level)


@sandbox.command()
@state_dir_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=_lifecycle.DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each service to answer.",
)
def up(state_dir: Path, timeout: float) -> None:
    """Start the stack (or confirm it runs); recovers from a crashed previous run."""
    connection = _lifecycle.start(state_dir, timeout=timeout)
    click.echo(f"sandbox running in {connection.state_dir}")
    click.echo(f"  postgresql  {connection.postgres_dsn}")
    click.echo(f"  zookeeper   {connection.zookeeper_hosts}")
    click.echo(f"  kafka       {connection.kafka_bootstrap_servers}")
    click.echo(f'use it from a shell with: eval "$(pgshovel-sandbox env --state-dir {state_dir})"')


@sandbox.command()
@state_dir_option
@click.option("--purge", is_flag=True, help="Also delete the state directory and all data.")
def down(state_dir: Path, purge: bool) -> None:
    """Stop every process of the stack; safe to repeat."""
    _lifecycle.stop(state_dir, purge=purge)
    click.echo(f"sandbox in {state_dir} {'purged' if purge else 'stopped'}")


@sandbox.command()
@state_dir_option
def status(state_dir: Path) -> None:
    """Show each service's PID, port and whether it runs; exit 1 if any is down."""
    report = _lifecycle.status(state_dir)
    for service in report:
        state = "running" if service.running else "down"
        click.echo(f"{service.name:<10} pid={service.pid} port={service.port} {state}")
    down = [service.name for service in report if not service.running]
    if down:
        raise SandboxError(f"sandbox in {str(state_dir)!r} is not running: {', '.join(down)} down")


@sandbox.command()
@state_dir_option
def env(state_dir: Path) -> None:
    """Print shell exports (PGSHOVEL_*) for the running sandbox."""
    down = [service.name for service in _lifecycle.status(state_dir) if not service.running]
    if down:
        raise SandboxError(
            f"sandbox in {str(state_dir)!r} is not running ({', '.join(down)} down): "
            "start it with 'pgshovel-sandbox up'"
        )
    click.echo(shell_exports(_lifecycle.load(state_dir).environment()), nl=False)


def main() -> None:
    _cli.run(sandbox)


if __name__ == "__main__":
    main()
