"""Start, stop and inspect a sandbox: what the Python API and the CLI call.

``start`` is idempotent: a healthy sandbox is returned as is; anything else
(nothing there, a crashed run, a stopped one) is recovered by stopping the
recorded processes that are still the sandbox's own, re-choosing ports that are
no longer free, reusing the data directories, and starting the servers again
(:mod:`pgshovel.sandbox._startup`). Every command holds an exclusive lock on
the state directory.

``stop`` keeps the data, so ``start`` resumes the sandbox as it was (the three
servers' data stays consistent: ZooKeeper's sets and Kafka's topics with the
databases they came from); ``data`` says where it is and how large, PostgreSQL's
too when it lives outside the state directory (under the ``postgres`` user's
home, see :func:`pgshovel.sandbox._postgres.locate`). ``stop(purge=True)``
deletes all of it; ``discard_data`` deletes the servers' data of a stopped
sandbox but keeps its logs (the test harness, after a failed run).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _postgres, _process, _servers, _spark, _startup, _state
from pgshovel.sandbox._connection import SandboxConnection
from pgshovel.sandbox._plan import SERVICES, ProcessState
from pgshovel.sandbox._state import load

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 90.0


#: the state directory's data directories (logs and sandbox.json are beside them)
DATA_DIRECTORIES = ("postgres", "zookeeper", "kafka")


@dataclass(frozen=True)
class DataPlace:
    """A directory holding a sandbox's data, and its size."""

    path: Path
    size: int
    #: PostgreSQL's data, kept outside the state directory (its server user cannot enter it)
    outside: bool = False


@dataclass(frozen=True)
class ServiceStatus:
    """One service of a sandbox as ``status`` reports it."""

    name: str
    pid: int | None
    port: int | None
    running: bool


def status(state_dir: Path) -> list[ServiceStatus]:
    """Per service: the recorded PID and port, and whether that process still runs."""
    state_dir = Path(state_dir).resolve()
    connection = load(state_dir)
    markers = _state.markers(state_dir, _state.location(state_dir, connection))
    report = []
    for service in SERVICES:
        pid = connection.pids.get(service)
        running = pid is not None and _process.state_of(pid, markers[service]) is ProcessState.OURS
        report.append(ServiceStatus(service, pid, connection.ports.get(service), running))
    for daemon in _spark.status(state_dir):
        report.append(ServiceStatus(daemon.name, daemon.pid, daemon.port, daemon.running))
    return report


def start(state_dir: Path, timeout: float = DEFAULT_TIMEOUT) -> SandboxConnection:
    """Start the sandbox in ``state_dir`` (or return it if it already runs and answers)."""
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    with _state.locked(state_dir):
        previous = _load_quietly(state_dir)
        if previous is not None and _startup.healthy(state_dir, previous):
            logger.info("the sandbox in %s is already running", state_dir)
            return previous
        _stop_recorded(state_dir, previous)
        _spark.stop_recorded(state_dir)  # the new sandbox.json names no cluster
        return _startup.start_services(state_dir, previous, timeout)


def stop(state_dir: Path, purge: bool = False) -> None:
    """Stop every process of the sandbox (safe to repeat); ``purge`` also deletes its data."""
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return
    with _state.locked(state_dir):
        previous = _load_quietly(state_dir)
        _servers.stop_all(state_dir)
        _spark.stop_recorded(state_dir)
        _stop_recorded(state_dir, previous)
        if purge:
            _postgres.purge(_state.location(state_dir, previous), state_dir)
            shutil.rmtree(state_dir)
            logger.info("removed %s", state_dir)


def data(state_dir: Path) -> list[DataPlace]:
    """Where the sandbox in ``state_dir`` keeps data, and how much: the state directory, and
    PostgreSQL's data directory's root when it is elsewhere."""
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return []
    places = [DataPlace(state_dir, _size(state_dir))]
    where = _state.location(state_dir, _load_quietly(state_dir))
    if not where.root.is_relative_to(state_dir) and where.root.exists():
        places.append(DataPlace(where.root, _size(where.root), outside=True))
    return places


def discard_data(state_dir: Path) -> None:
    """Delete the data of a stopped sandbox (PostgreSQL's too, wherever it is); keep its logs
    and ``sandbox.json``."""
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return
    with _state.locked(state_dir):
        _postgres.purge(_state.location(state_dir, _load_quietly(state_dir)), state_dir)
        for name in DATA_DIRECTORIES:
            shutil.rmtree(state_dir / name, ignore_errors=True)


def _size(root: Path) -> int:
    """The bytes of the files under ``root`` (what cannot be read counts 0)."""
    total = 0
    for directory, _subdirectories, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(directory) / name).lstat().st_size
    return total


def terminate(connection: SandboxConnection) -> None:
    """Stop the processes a connection record names, even if its state directory is gone.

    For callers that hold the record in memory (the test harness): somebody may
    have deleted the directory, and with it ``sandbox.json`` and the PID files.
    """
    state_dir = Path(connection.state_dir)
    if state_dir.is_dir():
        _servers.stop_all(state_dir)
        _spark.stop_recorded(state_dir)
    location = _state.location(state_dir, connection)
    recorded = {service: {pid} for service, pid in connection.pids.items()}
    _state.stop_pids(state_dir, location, recorded)


def _stop_recorded(state_dir: Path, previous: SandboxConnection | None) -> None:
    """Stop the live processes named by sandbox.json, the PID files and postmaster.pid."""
    location = _state.location(state_dir, previous)
    recorded: dict[str, set[int]] = {service: set() for service in SERVICES}
    if previous is not None:
        for service, pid in previous.pids.items():
            recorded.setdefault(service, set()).add(pid)
    for service in SERVICES:
        recorded[service].update(_state.read_pid(_state.pid_file(state_dir, service)))
    recorded["postgres"].update(_state.read_pid(location.data_dir / "postmaster.pid"))
    _state.stop_pids(state_dir, location, recorded)
    for service in SERVICES:
        _state.pid_file(state_dir, service).unlink(missing_ok=True)


def _load_quietly(state_dir: Path) -> SandboxConnection | None:
    try:
        return load(state_dir)
    except SandboxError as error:
        if (state_dir / _state.STATE_FILE).exists():
            logger.warning("ignoring the unreadable record of the previous run: %s", error)
        return None
