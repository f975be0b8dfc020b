"""Extra PostgreSQL servers beside the sandbox's: physical standbys, and primaries to fail over.

``start_server(state_dir, name)`` runs a new primary (initdb) and
``start_server(state_dir, name, primary_port=P)`` a streaming standby of the
server on port ``P`` (``pg_basebackup -R``; its ``cluster_name`` is ``name``,
which is how ``pg_stat_replication`` and a relay's ``standbys:`` name it). Each
runs as a detached child process on a free 127.0.0.1 port with its data in
``<data root>/servers/<name>`` (beside the sandbox's own data directory, so the
server user can reach it), and is recorded in ``<state_dir>/servers.json`` so
``pgshovel-sandbox down`` stops it. ``promote`` ends recovery; ``kill`` is a
``kill -9`` of the postmaster (an unplanned failure); ``stop`` a fast shutdown.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg2
from psycopg2 import sql

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _postgres, _process, _state
from pgshovel.sandbox._connection import SOURCE_DATABASE, postgres_dsn
from pgshovel.sandbox._render import initdb_command, postgres_command

logger = logging.getLogger(__name__)

RECORD = "servers.json"


@dataclass(frozen=True)
class Server:
    """One extra server: its name, port, PID and data directory."""

    name: str
    port: int
    pid: int
    data_dir: str
    log: str

    def dsn(self, dbname: str = SOURCE_DATABASE) -> str:
        return postgres_dsn(self.port, dbname)

    def in_recovery(self) -> bool:
        return bool(_query(self.dsn("postgres"), "SELECT pg_is_in_recovery()"))

    def promote(self, timeout: float = 60.0) -> None:
        """End recovery and wait until the server accepts writes."""
        if not _query(self.dsn("postgres"), "SELECT pg_promote(true, %s)", (int(timeout),)):
            raise SandboxError(f"server {self.name!r} did not finish its promotion in {timeout}s")
        logger.info("promoted %s (port %d)", self.name, self.port)

    def kill(self) -> None:
        """``kill -9`` of the postmaster (its backends notice and exit)."""
        _process.stop_process(self.pid, self.data_dir, signal.SIGKILL, 10.0)

    def stop(self) -> None:
        _process.stop_process(self.pid, self.data_dir, signal.SIGINT, 30.0)


def _connect(dsn: str) -> psycopg2.extensions.connection:
    connection = psycopg2.connect(dsn, connect_timeout=5)
    connection.autocommit = True
    return connection


def _query(
    dsn: str, statement: sql.Composable | str, parameters: tuple[object, ...] = ()
) -> object:
    """The first value of one autocommit statement (None when it returns no row)."""
    connection = _connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement, parameters or None)
            row = cursor.fetchone() if cursor.description else None
    finally:
        connection.close()
    return None if row is None else row[0]


def _root(state_dir: Path) -> Path:
    """Where extra servers keep their data: beside the sandbox's data directory."""
    data_dir = Path(_state.load(state_dir).postgres_data_dir or state_dir / "postgres" / "data")
    return data_dir.parent / "servers"


def _run(command: list[str], log: Path, user: _postgres.ServerUser, what: str) -> None:
    with open(log, "ab") as output:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
            user=user.name if user.switch else None,
            group=user.gid if user.switch else None,
            extra_groups=[] if user.switch else None,
        )
    if result.returncode != 0:
        raise SandboxError(f"{what} failed with exit status {result.returncode}: see {str(log)!r}")


def start_server(
    state_dir: Path, name: str, primary_port: int | None = None, timeout: float = 60.0
) -> Server:
    """A new primary, or with ``primary_port`` a streaming standby of that server."""
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise SandboxError(f"server name {name!r}: use letters, digits, '-' and '_'")
    user = _postgres.server_user()
    root = _root(state_dir)
    directory = root / name
    data_dir, socket_dir = directory / "data", directory / "socket"
    if directory.exists():
        stop_server(state_dir, name)
        shutil.rmtree(directory)
    socket_dir.mkdir(parents=True)
    for path in (root, directory, socket_dir):
        if user.switch:
            os.chown(path, user.uid, user.gid)
    log = state_dir / f"server-{name}.log"
    bindir = _postgres.bindir()
    if primary_port is None:
        _run(initdb_command(bindir, data_dir), log, user, f"initdb of {name!r}")
        with (data_dir / "pg_hba.conf").open("a") as hba:  # standbys of it connect over TCP
            hba.write("\nhost replication all 127.0.0.1/32 trust\n")
    else:
        connection = f"host=127.0.0.1 port={primary_port} user=postgres"
        command = [str(bindir / "pg_basebackup"), "-d", connection, "-D", str(data_dir)]
        _run([*command, "-R", "-X", "stream", "-c", "fast", "--no-sync"], log, user, "basebackup")
    port = _process.allocate_port()
    # Its name is its cluster_name: what pg_stat_replication shows for a standby.
    pid = _process.spawn(
        [*postgres_command(bindir, data_dir, socket_dir, port), "-c", f"cluster_name={name}"],
        log,
        cwd=directory,
        user=user.name if user.switch else None,
    )
    server = Server(name, port, pid, str(data_dir), str(log))
    _record(state_dir, server)
    _wait_answers(server, timeout)
    if primary_port is None:
        _create_source_database(server)
    logger.info("started server %s on port %d (pid %d)", name, port, pid)
    return server


def _wait_answers(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _connect(server.dsn("postgres")).close()
            return
        except psycopg2.OperationalError as error:
            if not _process.is_running(server.pid) or time.monotonic() > deadline:
                raise SandboxError(
                    f"server {server.name!r} did not start ({error}); see {server.log!r}"
                ) from error
            time.sleep(0.2)


def _create_source_database(server: Server) -> None:
    _query(
        server.dsn("postgres"),
        sql.SQL("CREATE DATABASE {}").format(sql.Identifier(SOURCE_DATABASE)),
    )


def servers(state_dir: Path) -> dict[str, Server]:
    """The extra servers recorded for the sandbox in ``state_dir``."""
    path = state_dir / RECORD
    if not path.exists():
        return {}
    return {name: Server(**fields) for name, fields in json.loads(path.read_text()).items()}


def _record(state_dir: Path, server: Server) -> None:
    known = servers(state_dir)
    known[server.name] = server
    (state_dir / RECORD).write_text(json.dumps({n: asdict(s) for n, s in known.items()}))


def stop_server(state_dir: Path, name: str) -> None:
    known = servers(state_dir)
    server = known.pop(name, None)
    if server is not None:
        server.stop()
        (state_dir / RECORD).write_text(json.dumps({n: asdict(s) for n, s in known.items()}))


def stop_all(state_dir: Path) -> None:
    """Stop every extra server (``pgshovel-sandbox down``)."""
    for name in list(servers(state_dir)):
        stop_server(state_dir, name)
