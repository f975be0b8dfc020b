"""The sandbox's PostgreSQL 15: initdb as the server user, start, wait, databases, PgQ check.

As root, the server and initdb run as the ``postgres`` user (the server refuses
root); otherwise as the current user. The binaries come from
``$PGSHOVEL_POSTGRES_BINDIR`` or Debian's ``/usr/lib/postgresql/15/bin``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pwd
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg2
from psycopg2 import sql

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _process
from pgshovel.sandbox._connection import SOURCE_DATABASE, TARGET_DATABASE, postgres_dsn
from pgshovel.sandbox._plan import (
    PostgresLocation,
    ProcessState,
    pid_in_file,
    postgres_location,
    traversable,
)
from pgshovel.sandbox._render import (
    POSTGRES_DURABILITY,
    POSTGRES_INCLUDE_LINE,
    POSTGRES_INCLUDED_FILE,
    initdb_command,
    postgres_command,
    render_postgres_conf,
)

logger = logging.getLogger(__name__)

DEFAULT_BINDIR = Path("/usr/lib/postgresql/15/bin")
SERVER_USER = "postgres"


@dataclass(frozen=True)
class ServerUser:
    """The account the server runs as; ``switch`` when we are root and must change to it."""

    name: str
    uid: int
    gid: int
    home: Path
    switch: bool


def bindir() -> Path:
    path = Path(os.environ.get("PGSHOVEL_POSTGRES_BINDIR", str(DEFAULT_BINDIR)))
    if not (path / "postgres").exists():
        raise SandboxError(
            f"postgresql server binaries not found in {str(path)!r}: install postgresql-15 "
            "(make setup) or set PGSHOVEL_POSTGRES_BINDIR"
        )
    return path


def server_user() -> ServerUser:
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid())
        return ServerUser(me.pw_name, me.pw_uid, me.pw_gid, Path(me.pw_dir), switch=False)
    try:
        account = pwd.getpwnam(SERVER_USER)
    except KeyError as error:
        raise SandboxError(
            f"running as root but there is no {SERVER_USER!r} user to run postgresql: "
            "install postgresql-15 (make setup)"
        ) from error
    return ServerUser(account.pw_name, account.pw_uid, account.pw_gid, Path(account.pw_dir), True)


def locate(state_dir: Path, recorded_data_dir: str, user: ServerUser) -> PostgresLocation:
    """Decide where the data directory lives (see :func:`_plan.postgres_location`)."""
    digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]
    return postgres_location(
        state_dir,
        recorded_data_dir,
        reachable=not recorded_data_dir and _reachable(state_dir, user),
        fallback_root=user.home / "pgshovel-sandbox" / digest,
    )


def prepare(location: PostgresLocation, user: ServerUser, log_file: Path) -> None:
    """Create the directories and, unless a usable cluster is there, run initdb."""
    for directory in (location.root, location.socket_dir):
        directory.mkdir(parents=True, exist_ok=True)
        if user.switch:
            os.chown(directory, user.uid, user.gid)
    if (location.data_dir / "PG_VERSION").exists():
        _clear_stale_locks(location)
        return
    if location.data_dir.exists():
        logger.warning("removing incomplete postgresql data directory %s", location.data_dir)
        shutil.rmtree(location.data_dir)
    logger.info("initdb %s", location.data_dir)
    with open(log_file, "ab") as output:
        result = subprocess.run(
            initdb_command(bindir(), location.data_dir),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=location.root,
            check=False,
            user=user.name if user.switch else None,
            group=user.gid if user.switch else None,
            extra_groups=[] if user.switch else None,
        )
    if result.returncode != 0:
        raise SandboxError(
            f"initdb failed with exit status {result.returncode}: see {str(log_file)!r}"
        )


def start(location: PostgresLocation, user: ServerUser, port: int, log_file: Path) -> int:
    _write_durability_settings(location, user)
    command = postgres_command(bindir(), location.data_dir, location.socket_dir, port)
    return _process.spawn(
        command, log_file, cwd=location.root, user=user.name if user.switch else None
    )


def _write_durability_settings(location: PostgresLocation, user: ServerUser) -> None:
    """The settings ``ALTER SYSTEM`` may override, in a file ``postgresql.conf`` includes."""
    included = location.data_dir / POSTGRES_INCLUDED_FILE
    included.write_text(render_postgres_conf(POSTGRES_DURABILITY), encoding="utf-8")
    if user.switch:
        os.chown(included, user.uid, user.gid)
    conf = location.data_dir / "postgresql.conf"
    if POSTGRES_INCLUDE_LINE not in conf.read_text(encoding="utf-8").splitlines():
        with conf.open("a", encoding="utf-8") as output:
            output.write(f"\n{POSTGRES_INCLUDE_LINE}\n")


def answers(location: PostgresLocation, pid: int, port: int) -> bool:
    """Whether our postmaster accepts queries on ``port`` (and it is ours that answered)."""
    if not _process.listens(pid, port):
        return False
    try:
        with psycopg2.connect(postgres_dsn(port, "postgres"), connect_timeout=3) as connection:
            with connection.cursor() as cursor:
                cursor.execute("SHOW data_directory")
                row = cursor.fetchone()
            connection.rollback()
        connection.close()
    except psycopg2.Error:
        return False
    return row is not None and Path(row[0]).resolve() == location.data_dir.resolve()


def create_databases(port: int) -> None:
    """Create the source and target databases; require the PgQ extension to be installable."""
    connection = psycopg2.connect(postgres_dsn(port, "postgres"), connect_timeout=10)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            for name in (SOURCE_DATABASE, TARGET_DATABASE):
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cursor.fetchone() is None:
                    cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            cursor.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'pgq'")
            if cursor.fetchone() is None:
                raise SandboxError(
                    "the pgq extension is not available to the sandbox postgresql: "
                    "install postgresql-15-pgq3 (make setup)"
                )
    finally:
        connection.close()


def stop(pid: int, location: PostgresLocation, timeout: float) -> None:
    """Fast shutdown (SIGINT to the postmaster): roll back sessions, write a checkpoint."""
    _process.stop_process(pid, str(location.data_dir), signal.SIGINT, timeout)


def purge(location: PostgresLocation, state_dir: Path) -> None:
    """Remove a data directory kept outside the state directory (inside goes with it)."""
    if location.root.is_relative_to(state_dir):
        return
    if location.root.exists():
        shutil.rmtree(location.root)
    with contextlib.suppress(OSError):  # the shared parent goes once the last sandbox did
        location.root.parent.rmdir()


def _clear_stale_locks(location: PostgresLocation) -> None:
    """Make the lock files a crashed server left behind harmless.

    A server of ours still running on the data directory is stopped. A lock
    whose PID now belongs to somebody else is removed. Otherwise the dead
    server's PID must have really disappeared (a killed server stays a zombie
    until it is reaped, and PostgreSQL takes that for a live one); then
    ``postmaster.pid`` is left for PostgreSQL itself to judge (it also checks that
    no orphaned backend still uses the old shared memory) and the socket locks,
    which guard nothing but the socket, are removed.
    """
    marker = str(location.data_dir)
    data_lock = location.data_dir / "postmaster.pid"
    for lock in [data_lock, *location.socket_dir.glob(".s.PGSQL.*.lock")]:
        try:
            pid = pid_in_file(lock.read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            continue
        state = ProcessState.GONE if pid is None else _process.state_of(pid, marker)
        if pid is not None and state is ProcessState.OURS:
            logger.warning(
                "a postgresql server (pid %d) still runs on %s: stopping it", pid, marker
            )
            stop(pid, location, timeout=30.0)
        if pid is not None and state is not ProcessState.FOREIGN:
            _process.wait_exited(pid, timeout=10.0)
        if lock != data_lock or pid is None or state is ProcessState.FOREIGN:
            logger.info("removing stale lock file %s", lock)
            lock.unlink(missing_ok=True)


def _reachable(state_dir: Path, user: ServerUser) -> bool:
    """Whether the server user can enter the state directory and all its parents."""
    if not user.switch:
        return True
    gids = [user.gid, *os.getgrouplist(user.name, user.gid)]
    for directory in [state_dir, *state_dir.parents]:
        try:
            info = directory.stat()
        except FileNotFoundError:  # not created yet: it will be, like its parent
            continue
        if not traversable(info.st_mode, info.st_uid, info.st_gid, user.uid, gids):
            return False
    return True
