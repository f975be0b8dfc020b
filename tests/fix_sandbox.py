"""pytest plugin: the sandbox services for integration tests (loaded with ``-p tests.fix_sandbox``).

One sandbox serves the whole run. It starts the first time an integration test
asks for it (a unit-only run starts nothing), in a temporary state directory,
and is always stopped: by the session teardown (also after Ctrl-C), by an
``atexit`` hook, and on SIGTERM. A run that passed deletes the directory; a
failed one keeps its logs there and says where, and deletes the servers' data
(PostgreSQL's too when it lives under the postgres user's home). The run gets
an ``XDG_STATE_HOME`` of its own, so nothing it starts (``pgshovel-sandbox up``,
the demo) records a sandbox where the user's ``pgshovel-sandbox`` commands
would find it, and a ``SPARK_SUBMIT_OPTS`` (unless one is set) that starts every
Spark driver JVM of the run (the workers' and the in-process sessions) with the
quick-start JIT and the serial collector, which roughly halves a Spark start on
a loaded machine. When ``PGSHOVEL_TEST_SANDBOX``
names the state directory of a running sandbox (``pgshovel-sandbox up``), that
one is used and left running. ``spark_cluster`` adds a Spark standalone cluster
of two one-core workers to the run's sandbox for the tests that ask for it (a
cluster already running there is used and left running), stopped at the end of
the session even after a failure, and with the sandbox. Tests that use these
fixtures must be marked ``integration`` (``pytestmark = pytest.mark.integration``).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql
from psycopg2.extensions import make_dsn

from pgshovel.errors import SandboxError
from pgshovel.sandbox import (
    SandboxConnection,
    SparkCluster,
    discard_data,
    load,
    load_spark,
    start,
    start_spark,
    status,
    stop,
    stop_spark,
    terminate,
    terminate_spark,
)

ENV_VAR = "PGSHOVEL_TEST_SANDBOX"
SANDBOX_FIXTURES = frozenset(
    {
        "sandbox",
        "make_database",
        "database",
        "cluster_name",
        "zookeeper",
        "topic",
        "kafka_config",
        "spark_cluster",
    }
)
#: the shape of the tests' Spark cluster (a test that kills a worker starts a replacement)
SPARK_WORKERS = 2


class MakeDatabase(Protocol):
    """The ``make_database`` fixture: create a fresh database, return its DSN."""

    def __call__(self, name_hint: str = "db") -> str: ...


class _RunSandbox:
    """The run's one sandbox: started on first use, stopped exactly once."""

    def __init__(self) -> None:
        self.connection: SandboxConnection | None = None
        self.state_dir: Path | None = None
        self.owned = False
        self.startup_seconds = 0.0
        self.kept: Path | None = None

    def get(self) -> SandboxConnection:
        if self.connection is None:
            external = os.environ.get(ENV_VAR)
            self.connection = self._use(Path(external)) if external else self._start()
        return self.connection

    def _use(self, state_dir: Path) -> SandboxConnection:
        try:
            down = [service.name for service in status(state_dir) if not service.running]
        except SandboxError as error:
            pytest.fail(f"{ENV_VAR}={str(state_dir)!r}: {error}", pytrace=False)
        if down:
            pytest.fail(
                f"{ENV_VAR}={str(state_dir)!r} names a sandbox that is not running "
                f"({', '.join(down)} down): run 'pgshovel-sandbox up --state-dir {state_dir}'",
                pytrace=False,
            )
        return load(state_dir)

    def _start(self) -> SandboxConnection:
        self.state_dir = Path(tempfile.mkdtemp(prefix="pgshovel-test-sandbox-"))
        # mkdtemp makes it private; PostgreSQL's server user must be able to enter it.
        self.state_dir.chmod(0o755)
        self.owned = True
        atexit.register(self.shutdown)
        _stop_on_sigterm(self)
        began = time.monotonic()
        connection = start(self.state_dir)
        self.startup_seconds = time.monotonic() - began
        return connection

    def shutdown(self, keep: bool = True) -> None:
        """Stop the sandbox if this run started it; delete its directory unless ``keep``."""
        if not self.owned or self.state_dir is None:
            return
        self.owned = False
        try:
            stop(self.state_dir, purge=not keep)
        finally:
            # Without its directory (somebody deleted it) stop() finds no record:
            # the servers are still ours to stop, by the PIDs held here.
            if self.connection is not None:
                terminate(self.connection)
        if keep and self.state_dir.exists():
            # The logs explain a failure; the data (~100 MB) would only pile up, in /tmp or
            # under the postgres user's home.
            discard_data(self.state_dir)
            self.kept = self.state_dir


_RUN = _RunSandbox()


def _stop_on_sigterm(run: _RunSandbox) -> None:
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except ValueError:
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        run.shutdown()
        signal.signal(signal.SIGTERM, previous)
        os.kill(os.getpid(), signum)

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: atexit and the session teardown remain
        pass


#: the run's own state home, and the XDG_STATE_HOME it replaced (None: unset)
_STATE_HOME: list[tuple[Path, str | None]] = []
#: JVM options of every Spark driver the run starts (spark-submit reads SPARK_SUBMIT_OPTS): a
#: test's driver lives seconds to minutes, where C1 alone starts it with half the CPU the
#: tiered compilers take, and one collector thread suits a two-core machine
SPARK_DRIVER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: whether this run set SPARK_SUBMIT_OPTS (and removes it at the end)
_SPARK_OPTS_SET: list[bool] = []


def pytest_configure(config: pytest.Config) -> None:
    """Give the run a state home of its own: the user's sandbox records stay untouched."""
    home = Path(tempfile.mkdtemp(prefix="pgshovel-test-state-"))
    _STATE_HOME.append((home, os.environ.get("XDG_STATE_HOME")))
    os.environ["XDG_STATE_HOME"] = str(home)
    if "SPARK_SUBMIT_OPTS" not in os.environ:
        os.environ["SPARK_SUBMIT_OPTS"] = SPARK_DRIVER_JVM
        _SPARK_OPTS_SET.append(True)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SPARK_OPTS_SET:
        _SPARK_OPTS_SET.clear()
        os.environ.pop("SPARK_SUBMIT_OPTS", None)
    while _STATE_HOME:
        home, previous = _STATE_HOME.pop()
        shutil.rmtree(home, ignore_errors=True)
        if previous is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = previous


def pytest_runtest_setup(item: pytest.Item) -> None:
    used = SANDBOX_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used and item.get_closest_marker("integration") is None:
        pytest.fail(
            f"{item.nodeid} uses sandbox fixtures {sorted(used)!r} but is not marked "
            "integration: add 'pytestmark = pytest.mark.integration' to its module",
            pytrace=False,
        )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _RUN.connection is not None and _RUN.startup_seconds:
        terminalreporter.write_line(f"sandbox started in {_RUN.startup_seconds:.1f} s")
    if _RUN.kept is not None:
        terminalreporter.write_line(f"sandbox stopped; its logs are kept in {_RUN.kept}")


@pytest.fixture(scope="session")
def sandbox(request: pytest.FixtureRequest) -> Iterator[SandboxConnection]:
    """The run's sandbox (PostgreSQL with PgQ, ZooKeeper, Kafka 0.9)."""
    yield _RUN.get()
    _RUN.shutdown(keep=request.session.testsfailed > 0)


@pytest.fixture(scope="session")
def spark_cluster(sandbox: SandboxConnection) -> Iterator[SparkCluster]:
    """A Spark standalone cluster of ``SPARK_WORKERS`` one-core workers beside the sandbox."""
    state_dir = Path(sandbox.state_dir)
    existing = load_spark(state_dir)
    if existing is not None:
        # Somebody else's (pgshovel-sandbox up --spark-workers N): repaired, left running.
        workers = max(SPARK_WORKERS, len(existing.workers))
        yield start_spark(state_dir, workers, existing.cores, existing.memory)
        return
    cluster = start_spark(state_dir, workers=SPARK_WORKERS)
    atexit.register(terminate_spark, cluster)  # a run ended by a signal
    try:
        yield cluster
    finally:
        stop_spark(state_dir)
        # Daemons started since (replacements of killed workers) are in spark.json;
        # the record held here still names the first ones if the directory is gone.
        terminate_spark(cluster)


@pytest.fixture(scope="session")
def kafka_config(sandbox: SandboxConnection) -> dict[str, str]:
    """confluent-kafka configuration for the sandbox broker."""
    return sandbox.kafka_config()


@pytest.fixture
def make_database(sandbox: SandboxConnection) -> Iterator[MakeDatabase]:
    """Create fresh databases on the sandbox PostgreSQL; all are dropped after the test."""
    created: list[str] = []

    def make(name_hint: str = "db") -> str:
        name = unique_name(name_hint, separator="_", limit=63)
        _administer(sandbox, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        created.append(name)
        return make_dsn(sandbox.postgres_dsn, dbname=name)

    yield make
    for name in reversed(created):
        _administer(
            sandbox, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def database(make_database: MakeDatabase) -> str:
    """The DSN of a fresh database, dropped after the test."""
    return make_database("db")


@pytest.fixture
def zookeeper(sandbox: SandboxConnection) -> Iterator[KazooClient]:
    """A started kazoo client on the sandbox ZooKeeper, stopped after the test."""
    client = KazooClient(hosts=sandbox.zookeeper_hosts, timeout=10.0)
    client.start(timeout=15.0)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def cluster_name(sandbox: SandboxConnection) -> Iterator[str]:
    """A unique pgshovel cluster name; its ZooKeeper tree is deleted after the test."""
    name = unique_name("test", separator="_", limit=40)
    yield name
    delete_cluster(sandbox, name)


def delete_cluster(sandbox: SandboxConnection, name: str) -> None:
    """Delete cluster ``name``'s ZooKeeper tree (if any)."""
    client = KazooClient(hosts=sandbox.zookeeper_hosts, timeout=10.0)
    client.start(timeout=15.0)
    try:
        client.delete(f"/{name}", recursive=True)
    finally:
        client.stop()
        client.close()


@pytest.fixture
def topic(sandbox: SandboxConnection) -> str:
    """A unique Kafka topic name (the broker creates topics on first use)."""
    return unique_name("test", separator="-", limit=100)


def unique_name(hint: str, separator: str, limit: int) -> str:
    """``<hint><sep><random>`` in lowercase letters, digits and ``separator`` only."""
    cleaned = re.sub(r"[^a-z0-9]+", separator, hint.lower()).strip(separator) or "t"
    if not cleaned[0].isalpha():
        cleaned = "t" + separator + cleaned
    suffix = uuid.uuid4().hex[:12]
    return f"{cleaned[: limit - len(suffix) - 1]}{separator}{suffix}"


def _administer(sandbox: SandboxConnection, statement: sql.Composable) -> None:
    connection = psycopg2.connect(sandbox.postgres_dsn)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()
