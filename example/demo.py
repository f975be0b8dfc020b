"""``make demo``: replicate the example shop end to end on the local stack and show it converge.

    python -m example.demo [--seconds 60] [--short] [--sandbox-dir .sandbox] [--keep-sandbox]

Steps: start the sandbox (or use the one running in ``--sandbox-dir``); create
fresh ``demo_source`` and ``demo_target`` databases; load example/schema.sql and
seed data into the source; ``pgshovel-admin cluster initialize`` and ``set
create demo example/set.yml``; start the web console (``pgshovel-admin serve``
on a free loopback port: its URL is printed), ``pgshovel-relay
example/relay.yml demo`` and ``pgshovel-replicate example/replication.yml demo``
(logs in ``<sandbox-dir>/demo/``); run the workload (example/workload.py) while
printing progress: the worker starting Spark and loading the snapshot, then,
once the copy streams, a live line every couple of seconds (mutations applied
per second, lag, rows per table) for ``--seconds``; wait until the worker
applied everything; print source and target row counts and checksums per
table. Exit status 0 only when every table matches. The console, the relay,
the worker and a sandbox the demo started are stopped at the end, also on
Ctrl-C or SIGTERM (``--keep-sandbox`` leaves the sandbox up).
Running it again starts from scratch: the demo's databases and its cluster's
ZooKeeper nodes are recreated.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

import psycopg2
from kazoo.exceptions import NoNodeError
from psycopg2 import sql
from psycopg2.extensions import make_dsn

from example import workload as shop
from example._compare import compare_tables
from example._monitor import PipelineProbe
from example._report import (
    Sample,
    TableComparison,
    apply_line,
    caught_up,
    copy_figures,
    progress_line,
    render_comparison,
    snapshot_status,
)
from example._services import (
    DemoError,
    Service,
    console_script,
    run_command,
    start_service,
    stop_service,
)
from pgshovel import sandbox
from pgshovel.cluster import names, zookeeper
from pgshovel.cluster.names import cluster_path
from pgshovel.errors import PgshovelError
from pgshovel.replication.cli import read_set_configuration

log = logging.getLogger(__name__)

EXAMPLE = Path(__file__).resolve().parent
COMMAND_TIMEOUT = 120.0
#: ``pgshovel-admin serve`` prints this with its URL once it listens
CONSOLE_URL = re.compile(r"console on (http://\S+) ")


@dataclass(frozen=True)
class DemoOptions:
    seconds: float = 60.0
    clients: int = 4
    rate: float = 40.0
    seed: int = 1
    aborted_ratio: float = 0.1
    sandbox_dir: Path = Path(".sandbox")
    keep_sandbox: bool = False
    cluster: str = "demo"
    set_name: str = "demo"
    database_prefix: str = "demo"
    catch_up_timeout: float = 240.0
    #: seconds for the worker to start Spark, load the snapshot and stream
    start_timeout: float = 360.0
    interval: float = 2.0
    set_file: Path = EXAMPLE / "set.yml"
    relay_file: Path = EXAMPLE / "relay.yml"
    replication_file: Path = EXAMPLE / "replication.yml"


def say(text: str) -> None:
    print(text, flush=True)


class Demo:
    """One run; :meth:`close` stops everything it started, in reverse order."""

    def __init__(self, options: DemoOptions) -> None:
        self.options = options
        self.cleanups: list[tuple[str, Callable[[], object]]] = []
        self.services: dict[str, Service] = {}
        self.began = time.monotonic()
        self.relayed = 0
        #: (schema, table) of the set, for the copy's row counts
        self.tables: list[tuple[str, str]] = []

    def run(self) -> int:
        options = self.options
        for path in (options.set_file, options.relay_file, options.replication_file):
            if not path.is_file():
                raise DemoError(f"configuration file {str(path)!r} is missing: the demo needs it")
        connection = self.start_sandbox()
        source_dsn, target_dsn = self.create_databases(connection)
        say("==> loading example/schema.sql and seed data into the source")
        shop.load_schema(source_dsn)
        shop.populate(source_dsn, options.seed)
        environment = self.environment(connection, source_dsn, target_dsn)
        self.create_set(connection, environment, source_dsn)
        configuration = read_set_configuration(
            connection.zookeeper_hosts, options.cluster, options.set_name
        )
        self.tables = [(table.schema or "public", table.name) for table in configuration.tables]
        topic = names.topic_name(options.cluster, options.set_name)
        probe = PipelineProbe(
            connection.kafka_config(),
            topic,
            source_dsn,
            target_dsn,
            options.cluster,
            options.set_name,
            connection.zookeeper_hosts,
        )
        self.cleanups.append(("probe", probe.close))
        topic_start = probe.topic_end() or 0
        logs = Path(connection.state_dir) / "demo"
        self.start_console(logs, environment)
        self.start(
            "relay", [console_script("pgshovel-relay"), str(options.relay_file)], logs, environment
        )
        workload = shop.Workload(
            source_dsn, options.clients, options.seed, options.aborted_ratio, options.rate
        )
        say(
            f"==> running the workload: {options.clients} clients, ~{options.rate:g} tx/s, "
            f"while the worker starts and then {options.seconds:g}s while the copy streams"
        )
        workload.start()
        self.cleanups.append(("workload", lambda: _stop_workload(workload)))
        self.start(
            "worker",
            [console_script("pgshovel-replicate"), str(options.replication_file)],
            logs,
            environment,
        )
        self.watch(probe, workload, topic_start, options.seconds)
        workload.stop()
        stats = workload.join()
        say(f"==> workload done: {stats.summary()}")
        say("==> waiting for the worker to apply everything")
        comparisons = self.converge(
            connection, probe, workload, topic_start, source_dsn, target_dsn
        )
        say("")
        say(render_comparison(comparisons))
        say("")
        matched = all(item.matches for item in comparisons)
        if matched:
            say(
                f"all {len(comparisons)} tables match: the replica converged "
                f"({self.relayed} messages relayed, {time.monotonic() - self.began:.0f}s)"
            )
            return 0
        differing = ", ".join(item.table for item in comparisons if not item.matches)
        say(
            f"tables differ: {differing}; see the logs in {logs} "
            "(rerun with --keep-sandbox to inspect the databases)"
        )
        return 1

    def start_sandbox(self) -> sandbox.SandboxConnection:
        state_dir = self.options.sandbox_dir.resolve()
        already = _sandbox_running(state_dir)
        say(f"==> {'using the running' if already else 'starting the'} sandbox in {state_dir}")
        if not already:
            if not state_dir.exists():
                state_dir.mkdir(parents=True)
                state_dir.chmod(0o755)
            if not self.options.keep_sandbox:
                self.cleanups.append(("sandbox", lambda: sandbox.stop(state_dir)))
        connection = sandbox.start(state_dir)
        if not already and self.options.keep_sandbox:
            # So that `pgshovel-sandbox env` run here (or below) finds it, as after `up`.
            sandbox.remember(state_dir)
        return connection

    def create_databases(self, connection: sandbox.SandboxConnection) -> tuple[str, str]:
        prefix = self.options.database_prefix
        names = (f"{prefix}_source", f"{prefix}_target")
        say(f"==> creating fresh databases {names[0]} and {names[1]}")
        admin = psycopg2.connect(connection.postgres_dsn, application_name="pgshovel-demo")
        try:
            admin.autocommit = True
            with admin.cursor() as cursor:
                for name in names:
                    cursor.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)
                        )
                    )
                    cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        finally:
            admin.close()
        return (
            make_dsn(connection.postgres_dsn, dbname=names[0]),
            make_dsn(connection.postgres_dsn, dbname=names[1]),
        )

    def environment(
        self, connection: sandbox.SandboxConnection, source_dsn: str, target_dsn: str
    ) -> dict[str, str]:
        """What the pgshovel commands and the ${VAR}s of the example configurations read."""
        environment = dict(os.environ)
        environment.update(connection.environment())
        environment.update(
            {
                "PGSHOVEL_SOURCE_DSN": source_dsn,
                "PGSHOVEL_TARGET_DSN": target_dsn,
                "PGSHOVEL_CLUSTER": self.options.cluster,
                "PYSPARK_PYTHON": sys.executable,
            }
        )
        environment.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        return environment

    def create_set(
        self, connection: sandbox.SandboxConnection, environment: dict[str, str], source_dsn: str
    ) -> None:
        options = self.options
        _forget_cluster(connection.zookeeper_hosts, options.cluster)
        admin = console_script("pgshovel-admin")
        say(f"==> pgshovel-admin cluster initialize (cluster {options.cluster!r})")
        run_command([admin, "cluster", "initialize"], environment, COMMAND_TIMEOUT)
        say(f"==> pgshovel-admin set create {options.set_name} {options.set_file}")
        run_command(
            [admin, "set", "create", options.set_name, str(options.set_file)],
            environment,
            COMMAND_TIMEOUT,
        )

    def start(
        self, name: str, command: Sequence[str], logs: Path, environment: dict[str, str]
    ) -> Service:
        command = [*command, self.options.set_name]
        service = start_service(name, command, logs / f"{name}.log", environment)
        self.services[name] = service
        self.cleanups.append((name, lambda: self.stop_service(service)))
        say(f"==> started {Path(command[0]).name} (pid {service.pid}), log {service.log_path}")
        return service

    def start_console(self, logs: Path, environment: dict[str, str]) -> None:
        """``pgshovel-admin serve`` on a free loopback port; prints the set's page URL."""
        command = [console_script("pgshovel-admin"), "serve", "--port", "0", "--refresh", "2"]
        service = start_service("console", command, logs / "console.log", environment)
        self.services["console"] = service
        self.cleanups.append(("console", lambda: self.stop_service(service)))
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while (found := CONSOLE_URL.search(service.output())) is None:
            self.check_services()
            if time.monotonic() > deadline:
                raise DemoError(f"the console printed no URL; see {service.log_path}")
            time.sleep(0.1)
        options = self.options
        say(
            f"==> console: {found.group(1)}clusters/{options.cluster}/sets/{options.set_name} "
            f"(pgshovel-admin serve, pid {service.pid}; read-only, open it in a browser)"
        )

    def stop_service(self, service: Service) -> None:
        status = stop_service(service)
        say(f"==> stopped {service.name} (pid {service.pid}, exit status {status})")

    def sample(self, probe: PipelineProbe, workload: shop.Workload, topic_start: int) -> Sample:
        self.check_services()
        stats = workload.stats()
        phase, next_offset = probe.worker()
        snapshot = None
        worker = self.services.get("worker")
        if phase != "streaming" and worker is not None:
            snapshot = snapshot_status(worker.log_tail(40))
        streaming = phase == "streaming"
        sample = Sample(
            elapsed=time.monotonic() - self.began,
            committed=stats.committed,
            aborted=stats.aborted,
            phase=phase,
            next_offset=next_offset,
            topic_end=probe.topic_end(),
            topic_start=topic_start,
            snapshot=snapshot,
            copy=copy_figures(probe.copy_status()) if streaming else None,
            table_rows=tuple(probe.table_rows(self.tables)) if streaming else (),
        )
        self.relayed = sample.relayed
        return sample

    def check_services(self) -> None:
        for service in self.services.values():
            if not service.running():
                raise DemoError(
                    f"{service.name} (pid {service.pid}) exited with status "
                    f"{service.process.returncode}; the end of {service.log_path}:\n"
                    f"{service.log_tail()}"
                )

    def watch(
        self, probe: PipelineProbe, workload: shop.Workload, topic_start: int, seconds: float
    ) -> None:
        """Print progress while the worker starts, then live lines for ``seconds`` of streaming."""
        start_deadline = time.monotonic() + self.options.start_timeout
        deadline: float | None = None
        while deadline is None or time.monotonic() < deadline:
            left = self.options.interval if deadline is None else deadline - time.monotonic()
            if workload.wait(min(self.options.interval, max(0.0, left))):
                workload.join()  # a client failed: raises its error
            sample = self.sample(probe, workload, topic_start)
            say(progress_line(sample))
            if sample.phase == "streaming":
                if deadline is None:
                    deadline = time.monotonic() + seconds
                say(apply_line(sample))
            elif time.monotonic() > start_deadline:
                worker = self.services["worker"]
                raise DemoError(
                    f"the worker did not stream within {self.options.start_timeout:g}s; "
                    f"the end of {worker.log_path}:\n{worker.log_tail()}"
                )

    def converge(
        self,
        connection: sandbox.SandboxConnection,
        probe: PipelineProbe,
        workload: shop.Workload,
        topic_start: int,
        source_dsn: str,
        target_dsn: str,
    ) -> list[TableComparison]:
        """Wait until the worker caught up and every table matches, or the timeout passes."""
        configuration = read_set_configuration(
            connection.zookeeper_hosts, self.options.cluster, self.options.set_name
        )
        tables = [(t.schema or "public", t.name, list(t.key_columns)) for t in configuration.tables]
        deadline = time.monotonic() + self.options.catch_up_timeout
        comparisons: list[TableComparison] = []
        while True:
            sample = self.sample(probe, workload, topic_start)
            pending = probe.queue_pending()
            if caught_up(sample.next_offset, sample.topic_end, pending):
                comparisons = compare_tables(source_dsn, target_dsn, tables)
                if all(item.matches for item in comparisons):
                    return comparisons
            say(progress_line(sample) + (f" | {pending} events queued" if pending else ""))
            if sample.phase == "streaming":
                say(apply_line(sample))
            if time.monotonic() >= deadline:
                say(f"==> the worker did not converge within {self.options.catch_up_timeout:g}s")
                return comparisons or compare_tables(source_dsn, target_dsn, tables)
            time.sleep(self.options.interval)

    def close(self) -> None:
        """Stop what this run started, newest first; keep going when one step fails."""
        while self.cleanups:
            name, cleanup = self.cleanups.pop()
            try:
                cleanup()
            except Exception as error:
                say(f"==> stopping the {name} failed: {error}")
            if name == "sandbox":
                say("==> sandbox stopped")


def _stop_workload(workload: shop.Workload) -> None:
    workload.stop()
    workload.join()


def _sandbox_running(state_dir: Path) -> bool:
    try:
        return all(service.running for service in sandbox.status(state_dir))
    except PgshovelError:
        return False


def _forget_cluster(zookeeper_hosts: str, cluster: str) -> None:
    """Delete the demo cluster's ZooKeeper tree left by an earlier run."""
    with zookeeper.connect(zookeeper_hosts) as client:
        try:
            client.delete(cluster_path(cluster), recursive=True)
        except NoNodeError:
            pass


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Ctrl-C and SIGTERM interrupt the demo (also when started with SIGINT ignored)."""

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {
        number: signal.signal(number, interrupt) for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """While stopping, Ctrl-C and SIGTERM only say that the demo is stopping."""

    def wait(signum: int, _frame: FrameType | None) -> None:
        say("==> stopping what the demo started, please wait")

    previous = {number: signal.signal(number, wait) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run_demo(options: DemoOptions) -> int:
    """Run the demo; 0 when every table matches, 1 when not or on an error, 130 on Ctrl-C."""
    demo = Demo(options)
    status = 1
    try:
        with _signals_interrupt():
            status = demo.run()
    except KeyboardInterrupt:
        say("==> interrupted")
        status = 130
    except PgshovelError as error:
        say(f"error: {error}")
    except psycopg2.Error as error:
        say(f"error: a database step failed: {str(error).strip()}")
    finally:
        with _signals_deferred():
            demo.close()
    return status


def parse_options(argv: Sequence[str] | None = None) -> DemoOptions:
    parser = argparse.ArgumentParser(
        prog="python -m example.demo",
        description="Replicate the example shop on the local stack and show the copy converge.",
    )
    defaults = DemoOptions()
    parser.add_argument(
        "--seconds",
        type=float,
        help=f"seconds the workload goes on once the copy streams ({defaults.seconds:g})",
    )
    parser.add_argument(
        "--short", action="store_true", help="a small workload, 15 s of streaming (for tests)"
    )
    parser.add_argument("--clients", type=int, help=f"workload clients ({defaults.clients})")
    parser.add_argument("--rate", type=float, help=f"transactions per second ({defaults.rate:g})")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="workload random seed")
    parser.add_argument(
        "--sandbox-dir",
        type=Path,
        default=Path(os.environ.get("PGSHOVEL_SANDBOX_DIR", str(defaults.sandbox_dir))),
        help="sandbox state directory (.sandbox; env PGSHOVEL_SANDBOX_DIR); "
        "a sandbox already running there is used and left running",
    )
    parser.add_argument(
        "--keep-sandbox", action="store_true", help="leave the sandbox running at the end"
    )
    parser.add_argument("--cluster", default=defaults.cluster, help="pgshovel cluster name")
    parser.add_argument(
        "--database-prefix",
        default=defaults.database_prefix,
        help="the demo's databases are PREFIX_source and PREFIX_target",
    )
    parser.add_argument("--set-file", type=Path, default=defaults.set_file)
    parser.add_argument("--relay-file", type=Path, default=defaults.relay_file)
    parser.add_argument("--replication-file", type=Path, default=defaults.replication_file)
    parser.add_argument(
        "--catch-up-timeout",
        type=float,
        default=defaults.catch_up_timeout,
        help="seconds to wait for the replica after the workload",
    )
    arguments = parser.parse_args(argv)
    if arguments.short:
        defaults = replace(defaults, seconds=15.0, clients=2, rate=20.0)
    options = replace(
        defaults,
        seed=arguments.seed,
        sandbox_dir=arguments.sandbox_dir,
        keep_sandbox=arguments.keep_sandbox,
        cluster=arguments.cluster,
        database_prefix=arguments.database_prefix,
        set_file=arguments.set_file,
        relay_file=arguments.relay_file,
        replication_file=arguments.replication_file,
        catch_up_timeout=arguments.catch_up_timeout,
    )
    overrides = {
        name: getattr(arguments, name)
        for name in ("seconds", "clients", "rate")
        if getattr(arguments, name) is not None
    }
    return replace(options, **overrides)


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("kazoo",):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    sys.exit(run_demo(parse_options(argv)))


if __name__ == "__main__":
    main()
