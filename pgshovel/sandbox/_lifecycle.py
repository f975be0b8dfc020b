"""Start, stop, inspect and load a sandbox: the orchestration behind the API and the CLI.

``start`` is idempotent: a healthy sandbox is returned as is; anything else
(nothing there, a crashed run, a stopped one) is recovered by stopping the
recorded processes that are still the sandbox's own, re-choosing ports that are
no longer free, reusing the data directories, then starting PostgreSQL,
ZooKeeper and Kafka in that order and waiting until each answers. Only when all
three answer is ``sandbox.json`` written. Every command holds an exclusive lock
on the state directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _kafka, _postgres, _process, _zookeeper
from pgshovel.sandbox._connection import (
    KAFKA_09_PROPERTIES,
    SOURCE_DATABASE,
    TARGET_DATABASE,
    SandboxConnection,
    postgres_dsn,
)
from pgshovel.sandbox._plan import (
    SERVICES,
    PostgresLocation,
    ProcessState,
    choose_ports,
    pid_in_file,
    processes_to_stop,
)

log = logging.getLogger(__name__)

STATE_FILE = "sandbox.json"
LOCK_FILE = ".lock"
DEFAULT_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
LOCK_TIMEOUT = 300.0


@dataclass(frozen=True)
class ServiceStatus:
    """One service of a sandbox as ``status`` reports it."""

    name: str
    pid: int | None
    port: int | None
    running: bool


def log_file(state_dir: Path, service: str) -> Path:
    return state_dir / f"{service}.log"


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


def status(state_dir: Path) -> list[ServiceStatus]:
    """Per service: the recorded PID and port, and whether that process still runs."""
    state_dir = Path(state_dir).resolve()
    connection = load(state_dir)
    markers = _markers(state_dir, _location(state_dir, connection))
    report = []
    for service in SERVICES:
        pid = connection.pids.get(service)
        running = pid is not None and _process.state_of(pid, markers[service]) is ProcessState.OURS
        report.append(ServiceStatus(service, pid, connection.ports.get(service), running))
    return report


def start(state_dir: Path, timeout: float = DEFAULT_TIMEOUT) -> SandboxConnection:
    """Start the sandbox in ``state_dir`` (or return it if it already runs and answers)."""
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    with _locked(state_dir):
        previous = _load_quietly(state_dir)
        if previous is not None and _healthy(state_dir, previous):
            log.info("the sandbox in %s is already running", state_dir)
            return previous
        _stop_recorded(state_dir, previous)
        return _start_services(state_dir, previous, timeout)


def stop(state_dir: Path, purge: bool = False) -> None:
    """Stop every process of the sandbox (safe to repeat); ``purge`` also deletes its data."""
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return
    with _locked(state_dir):
        previous = _load_quietly(state_dir)
        _stop_recorded(state_dir, previous)
        if purge:
            _postgres.purge(_location(state_dir, previous), state_dir)
            shutil.rmtree(state_dir)
            log.info("removed %s", state_dir)


def terminate(connection: SandboxConnection) -> None:
    """Stop the processes a connection record names, even if its state directory is gone.

    For callers that hold the record in memory (the test harness): somebody may
    have deleted the directory, and with it ``sandbox.json`` and the PID files.
    """
    state_dir = Path(connection.state_dir)
    location = _location(state_dir, connection)
    recorded = {service: {pid} for service, pid in connection.pids.items()}
    _stop_pids(state_dir, location, recorded)


def _start_services(
    state_dir: Path, previous: SandboxConnection | None, timeout: float
) -> SandboxConnection:
    user = _postgres.server_user()
    location = _location(state_dir, previous, user)
    markers = _markers(state_dir, location)
    ports = choose_ports(
        previous.ports if previous else {}, _process.port_is_free, _process.allocate_port
    )
    pids: dict[str, int] = {}
    try:
        began = time.monotonic()
        _postgres.prepare(location, user, log_file(state_dir, "postgres"))
        pid = pids["postgres"] = _postgres.start(
            location, user, ports["postgres"], log_file(state_dir, "postgres")
        )
        _record_pid(state_dir, "postgres", pid)
        _await(
            state_dir,
            "postgres",
            pid,
            timeout,
            lambda: _postgres.answers(location, pid, ports["postgres"]),
        )
        _postgres.create_databases(ports["postgres"])
        began = _timed("postgresql", began, ports["postgres"])

        pid = pids["zookeeper"] = _zookeeper.start(
            state_dir, ports["zookeeper"], log_file(state_dir, "zookeeper")
        )
        _record_pid(state_dir, "zookeeper", pid)
        _await(
            state_dir,
            "zookeeper",
            pid,
            timeout,
            lambda: _zookeeper.answers(pid, ports["zookeeper"]),
        )
        began = _timed("zookeeper", began, ports["zookeeper"])

        _kafka.forget_previous_broker(ports["zookeeper"])
        pid = pids["kafka"] = _kafka.start(
            state_dir, ports["kafka"], ports["zookeeper"], log_file(state_dir, "kafka")
        )
        _record_pid(state_dir, "kafka", pid)
        _await(
            state_dir,
            "kafka",
            pid,
            timeout,
            lambda: _kafka.answers(pid, ports["kafka"], KAFKA_09_PROPERTIES),
        )
        _kafka.warm_up(ports["kafka"], KAFKA_09_PROPERTIES, timeout)
        _timed("kafka", began, ports["kafka"])
    except BaseException:
        log.error("sandbox startup failed: stopping what was started")
        for service, started in processes_to_stop(
            {name: [pid] for name, pid in pids.items()},
            {pid: ProcessState.OURS for pid in pids.values()},
        ):
            _stop_one(service, started, markers[service], location)
        raise
    connection = SandboxConnection(
        state_dir=str(state_dir),
        postgres_dsn=postgres_dsn(ports["postgres"], "postgres"),
        source_dsn=postgres_dsn(ports["postgres"], SOURCE_DATABASE),
        target_dsn=postgres_dsn(ports["postgres"], TARGET_DATABASE),
        zookeeper_hosts=f"127.0.0.1:{ports['zookeeper']}",
        kafka_bootstrap_servers=f"127.0.0.1:{ports['kafka']}",
        kafka_properties=dict(KAFKA_09_PROPERTIES),
        pids=pids,
        ports=ports,
        postgres_data_dir=str(location.data_dir),
    )
    _write_atomically(state_dir / STATE_FILE, connection.to_json())
    return connection


def _healthy(state_dir: Path, connection: SandboxConnection) -> bool:
    location = _location(state_dir, connection)
    markers = _markers(state_dir, location)
    pids, ports = connection.pids, connection.ports
    if set(pids) != set(SERVICES) or set(ports) != set(SERVICES):
        return False
    if any(_process.state_of(pids[s], markers[s]) is not ProcessState.OURS for s in SERVICES):
        return False
    return (
        _postgres.answers(location, pids["postgres"], ports["postgres"])
        and _zookeeper.answers(pids["zookeeper"], ports["zookeeper"])
        and _kafka.answers(pids["kafka"], ports["kafka"], connection.kafka_properties)
    )


def _stop_recorded(state_dir: Path, previous: SandboxConnection | None) -> None:
    """Stop the live processes named by sandbox.json, the PID files and postmaster.pid."""
    location = _location(state_dir, previous)
    recorded: dict[str, set[int]] = {service: set() for service in SERVICES}
    if previous is not None:
        for service, pid in previous.pids.items():
            recorded.setdefault(service, set()).add(pid)
    for service in SERVICES:
        recorded[service].update(_read_pid(_pid_file(state_dir, service)))
    recorded["postgres"].update(_read_pid(location.data_dir / "postmaster.pid"))
    _stop_pids(state_dir, location, recorded)
    for service in SERVICES:
        _pid_file(state_dir, service).unlink(missing_ok=True)


def _stop_pids(state_dir: Path, location: PostgresLocation, recorded: dict[str, set[int]]) -> None:
    markers = _markers(state_dir, location)
    states = {
        pid: _process.state_of(pid, markers[service])
        for service, pids in recorded.items()
        for pid in pids
    }
    for service, pid in processes_to_stop(recorded, states):
        _stop_one(service, pid, markers[service], location)
    survivors = [
        f"{service} (pid {pid})"
        for service, pids in recorded.items()
        for pid in pids
        if _process.state_of(pid, markers[service]) is ProcessState.OURS
    ]
    if survivors:
        raise SandboxError(
            f"could not stop {', '.join(survivors)} of the sandbox in {str(state_dir)!r}: "
            "stop them by hand, then run 'pgshovel-sandbox down' again"
        )


def _stop_one(service: str, pid: int, marker: str, location: PostgresLocation) -> None:
    if service == "postgres":
        _postgres.stop(pid, location, STOP_TIMEOUT)
    else:
        _process.stop_process(pid, marker, signal.SIGTERM, STOP_TIMEOUT)


def _await(
    state_dir: Path, service: str, pid: int, timeout: float, ready: Callable[[], bool]
) -> None:
    def check() -> bool:
        if not _process.is_running(pid):
            raise SandboxError(
                f"{service} (pid {pid}) exited during startup: see "
                f"{str(log_file(state_dir, service))!r}"
            )
        return ready()

    if not _process.wait_until(check, timeout, interval=0.25):
        raise SandboxError(
            f"{service} (pid {pid}) did not answer within {timeout:.0f} s: see "
            f"{str(log_file(state_dir, service))!r}"
        )


def _timed(service: str, began: float, port: int) -> float:
    now = time.monotonic()
    log.info("%s ready on 127.0.0.1:%d in %.1f s", service, port, now - began)
    return now


def _location(
    state_dir: Path,
    connection: SandboxConnection | None,
    user: _postgres.ServerUser | None = None,
) -> PostgresLocation:
    recorded = connection.postgres_data_dir if connection is not None else ""
    return _postgres.locate(state_dir, recorded, user or _postgres.server_user())


def _markers(state_dir: Path, location: PostgresLocation) -> dict[str, str]:
    return {
        "postgres": str(location.data_dir),
        "zookeeper": str(_zookeeper.config_path(state_dir)),
        "kafka": str(_kafka.config_path(state_dir)),
    }


def _load_quietly(state_dir: Path) -> SandboxConnection | None:
    try:
        return load(state_dir)
    except SandboxError as error:
        if (state_dir / STATE_FILE).exists():
            log.warning("ignoring the unreadable record of the previous run: %s", error)
        return None


def _pid_file(state_dir: Path, service: str) -> Path:
    return state_dir / f"{service}.pid"


def _record_pid(state_dir: Path, service: str, pid: int) -> None:
    _write_atomically(_pid_file(state_dir, service), f"{pid}\n")


def _read_pid(path: Path) -> set[int]:
    try:
        pid = pid_in_file(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return set()
    return set() if pid is None else {pid}


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
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
