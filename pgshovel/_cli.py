"""What every pgshovel command line shares: global options, logging, error exits.

Every option can also come from the environment: ``--zookeeper-hosts`` from
``PGSHOVEL_ZOOKEEPER_HOSTS``, ``--cluster`` from ``PGSHOVEL_CLUSTER`` (click's
``auto_envvar_prefix``). Errors that pgshovel raises on purpose end the command
with a one-line reason (a line per problem of a configuration) and exit status
1; nothing else prints a traceback unless ``--debug`` is given. Every command
prints its version with ``--version``, read from the installed distribution's
metadata. ``run_and_leave`` (the worker's) also skips the interpreter's
teardown once the command is done, so native threads cannot turn a clean stop
into an abort.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from pgshovel import _kafka_log
from pgshovel.errors import ConfigurationError, PgshovelError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_CLUSTER = "default"
DEFAULT_ZOOKEEPER_HOSTS = "127.0.0.1:2181"
ENV_PREFIX = "PGSHOVEL"
DISTRIBUTION = "pgshovel"


def version_option(command: F) -> F:
    """Add ``--version``: the installed distribution's version (``pgshovel-relay 0.1.0``)."""
    return click.version_option(
        package_name=DISTRIBUTION,
        message="%(prog)s %(version)s",
        help="Show the version and exit.",
    )(command)


@dataclass(frozen=True)
class GlobalOptions:
    """The options every command takes."""

    cluster: str
    zookeeper_hosts: str
    debug: bool
    #: long-running processes: every detail (empty batches, each librdkafka warning, Spark's)
    verbose: bool = False


def global_options(command: F) -> F:
    """Add ``--cluster``, ``--zookeeper-hosts``, ``--log-level``, ``--debug`` and ``--version``."""
    decorators = [
        click.option(
            "--cluster",
            default=DEFAULT_CLUSTER,
            show_default=True,
            help="Cluster name (root node in ZooKeeper). Env: PGSHOVEL_CLUSTER.",
        ),
        click.option(
            "--zookeeper-hosts",
            default=DEFAULT_ZOOKEEPER_HOSTS,
            show_default=True,
            help="ZooKeeper connection string. Env: PGSHOVEL_ZOOKEEPER_HOSTS.",
        ),
        click.option(
            "--log-level",
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
            default="INFO",
            show_default=True,
            help="Logging level. Env: PGSHOVEL_LOG_LEVEL.",
        ),
        click.option("--debug", is_flag=True, help="Show tracebacks. Env: PGSHOVEL_DEBUG."),
        version_option,
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


#: The body of a long-running process's command: global options, configuration file, set name.
ProcessBody = Callable[[GlobalOptions, Path, str], None]


def process_command(name: str) -> Callable[[ProcessBody], click.Command]:
    """A long-running process's command line: global options, CONFIGURATION and SET.

    The decorated function receives the global options (logging installed), the
    configuration file's path and the set's name; its docstring is the help.
    """

    def decorate(body: ProcessBody) -> click.Command:
        @click.command(name=name, help=body.__doc__)
        @global_options
        @click.argument(
            "configuration", type=click.Path(exists=True, dir_okay=False, path_type=Path)
        )
        @click.argument("set_name", metavar="SET")
        @click.option(
            "--verbose",
            is_flag=True,
            help="Log every detail: DEBUG lines (batches without events), each librdkafka "
            "warning, Spark's warnings and startup lines. Env: PGSHOVEL_VERBOSE.",
        )
        def command(
            cluster: str,
            zookeeper_hosts: str,
            log_level: str,
            debug: bool,
            configuration: Path,
            set_name: str,
            verbose: bool,
        ) -> None:
            options = make_global_options(
                cluster, zookeeper_hosts, "DEBUG" if verbose else log_level, debug, verbose
            )
            body(options, configuration, set_name)

        return command

    return decorate


def make_global_options(
    cluster: str, zookeeper_hosts: str, log_level: str, debug: bool, verbose: bool = False
) -> GlobalOptions:
    """Install logging for a command and return its global options."""
    configure_logging(log_level)
    _kafka_log.verbose(verbose)
    return GlobalOptions(
        cluster=cluster, zookeeper_hosts=zookeeper_hosts, debug=debug, verbose=verbose
    )


def configure_logging(level: str) -> None:
    """Only command lines install log handlers; the library never does."""
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("kazoo", "py4j"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


def run(command: click.Command, argv: list[str] | None = None) -> None:
    """Run a click command; turn a ``PgshovelError`` into one line and exit status 1."""
    try:
        code = command.main(args=argv, auto_envvar_prefix=ENV_PREFIX, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except PgshovelError as error:
        if "--debug" in (argv if argv is not None else sys.argv):
            raise
        # A configuration error lists each of its problems on a line of its own.
        lines = str(error).splitlines() if isinstance(error, ConfigurationError) else [str(error)]
        click.echo("\n".join(f"error: {line}" for line in lines), err=True)
        sys.exit(1)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    if isinstance(code, int) and code:
        # A command that exits with a status (click.exceptions.Exit) returns it here.
        sys.exit(code)


def exit_status(code: object) -> int:
    """The process status ``sys.exit(code)`` means: None 0, an int itself, anything else 1
    (Python prints it to stderr)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def leave(status: int) -> NoReturn:
    """Flush the logs and standard streams and end the process with ``status`` at once,
    without the interpreter's teardown.

    After the worker stopped cleanly, that teardown sometimes aborted the process
    ("terminate called without an active exception", status 134, about one run in 12 of
    the test suite): threads of delta-rs's runtime or of Arrow's pools still running
    while the interpreter and the libraries' globals are destroyed (delta-io/delta-rs#2184,
    apache/arrow#39862). Everything the worker holds is closed or committed by then, so
    nothing is lost by skipping it."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken: nothing more can be written
            pass
    os._exit(status)


def run_and_leave(command: click.Command, argv: list[str] | None = None) -> NoReturn:
    """``run`` the command, then ``leave`` with its status (an uncaught exception: its
    traceback and 1; an interrupt: 130)."""
    try:
        run(command, argv)
        status = 0
    except SystemExit as leaving:
        status = exit_status(leaving.code)
    except KeyboardInterrupt:
        status = 130
    except BaseException:  # printed as the interpreter would, then left
        traceback.print_exc()
        status = 1
    leave(status)
