"""The state directory's bookkeeping: files, the record, PID files, the lock, stopping by PID.

Every process is identified by a marker path on its command line (see
:func:`pgshovel.sandbox._plan.classify_process`) so that a recorded PID is only
signalled while it still belongs to this sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _kafka, _postgres, _process, _zookeeper
from pgshovel.sandbox._connection import SandboxConnection
from pgshovel.sandbox._plan import PostgresLocation, ProcessState, pid_in_file, processes_to_stop

STATE_FILE = "sandbox.json"
LOCK_FILE = ".lock"
STOP_TIMEOUT = 30.0
LOCK_TIMEOUT = 300.0


def log_file(state_dir: Path, service: str) -> Path:
    return state_dir / f"{service}.log"


def pid_file(state_dir: Path, service: str) -> Path:
    return state_dir / f"{service}.pid"


def record_pid(state_dir: Path, service: str, pid: int) -> None:
    write_atomically(pid_file(state_dir, service), f"{pid}\n")


def read_pid(path: Path) -> set[int]:
    try:
        pid = pid_in_file(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return set()
    return set() if pid is None else {pid}


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def location(
    state_dir: Path,
    connection: SandboxConnection | None,
    user: _postgres.ServerUser | None = None,
) -> PostgresLocation:
    """Where this sandbox keeps PostgreSQL: as recorded, else as decided now."""
    recorded = connection.postgres_data_dir if connection is not None else ""
    return _postgres.locate(state_dir, recorded, user or _postgres.server_user())


def markers(state_dir: Path, where: PostgresLocation) -> dict[str, str]:
    """Per service, the path only that service's command line contains."""
    return {
        "postgres": str(where.data_dir),
        "zookeeper": str(_zookeeper.config_path(state_dir)),
        "kafka": str(_kafka.config_path(state_dir)),
    }


def stop_pids(state_dir: Path, where: PostgresLocation, recorded: dict[str, set[int]]) -> None:
    """Stop those recorded processes that are still ours (Kafka first); fail if one survives."""
    marks = markers(state_dir, where)
    states = {
        pid: _process.state_of(pid, marks[service])
        for service, pids in recorded.items()
        for pid in pids
    }
    for service, pid in processes_to_stop(recorded, states):
        stop_one(service, pid, marks[service], where)
    survivors = [
        f"{service} (pid {pid})"
        for service, pids in recorded.items()
        for pid in pids
        if _process.state_of(pid, marks[service]) is ProcessState.OURS
    ]
    if survivors:
        raise SandboxError(
            f"could not stop {', '.join(survivors)} of the sandbox in {str(state_dir)!r}: "
            "stop them by hand, then run 'pgshovel-sandbox down' again"
        )


def stop_one(service: str, pid: int, marker: str, where: PostgresLocation) -> None:
    if service == "postgres":
        _postgres.stop(pid, where, STOP_TIMEOUT)
    else:
        _process.stop_process(pid, marker, signal.SIGTERM, STOP_TIMEOUT)


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Hold the state directory's exclusive lock (one sandbox command at a time)."""
    with open(state_dir / LOCK_FILE, "a+b") as lock:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SandboxError(
                        f"another pgshovel-sandbox command holds {str(state_dir / LOCK_FILE)!r} "
                        f"for more than {LOCK_TIMEOUT:.0f} s: wait for it or stop it"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load(state_dir: Path) -> SandboxConnection:
    """The connection record of the sandbox in ``state_dir`` (it may have stopped since)."""
    path = Path(state_dir).resolve() / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise SandboxError(
            f"no sandbox in {str(path.parent)!r}: {STATE_FILE} is missing; "
            f"start one with 'pgshovel-sandbox up --state-dir {path.parent}'"
        ) from error
    return SandboxConnection.from_json(text, str(path))
