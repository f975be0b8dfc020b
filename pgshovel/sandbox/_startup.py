"""Bring the servers up in order, PostgreSQL, ZooKeeper, Kafka, and wait until each answers.

A server that exits before answering is tried once more on a fresh port (the
chosen port may have been taken meanwhile, e.g. by another sandbox starting at
the same moment). If anything fails, whatever this attempt started is stopped
again before the error propagates; ``sandbox.json`` is written only at the end.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _kafka, _postgres, _process, _state, _zookeeper
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
    processes_to_stop,
)

logger = logging.getLogger(__name__)


def start_services(
    state_dir: Path, previous: SandboxConnection | None, timeout: float
) -> SandboxConnection:
    """Start all three servers, reusing the previous run's ports and data where possible."""
    user = _postgres.server_user()
    location = _state.location(state_dir, previous, user)
    markers = _state.markers(state_dir, location)
    ports = choose_ports(
        previous.ports if previous else {}, _process.port_is_free, _process.allocate_port
    )
    pids: dict[str, int] = {}

    def start_postgres(port: int) -> int:
        return _postgres.start(location, user, port, _state.log_file(state_dir, "postgres"))

    def start_zookeeper(port: int) -> int:
        return _zookeeper.start(state_dir, port, _state.log_file(state_dir, "zookeeper"))

    def start_kafka(port: int) -> int:
        _kafka.forget_previous_broker(ports["zookeeper"])
        log_file = _state.log_file(state_dir, "kafka")
        return _kafka.start(state_dir, port, ports["zookeeper"], log_file)

    def kafka_answers(pid: int, port: int) -> bool:
        return _kafka.answers(pid, port, KAFKA_09_PROPERTIES)

    def stopper(service: str) -> Callable[[int], None]:
        return functools.partial(_state.stop_one, service, marker=markers[service], where=location)

    try:
        began = time.monotonic()
        _postgres.prepare(location, user, _state.log_file(state_dir, "postgres"))
        postgres_answers = functools.partial(_postgres.answers, location)
        _launch(
            state_dir,
            "postgres",
            ports,
            pids,
            timeout,
            start_postgres,
            postgres_answers,
            stopper("postgres"),
        )
        _postgres.create_databases(ports["postgres"])
        began = _timed("postgresql", began, ports["postgres"])
        _launch(
            state_dir,
            "zookeeper",
            ports,
            pids,
            timeout,
            start_zookeeper,
            _zookeeper.answers,
            stopper("zookeeper"),
        )
        began = _timed("zookeeper", began, ports["zookeeper"])
        _launch(
            state_dir,
            "kafka",
            ports,
            pids,
            timeout,
            start_kafka,
            kafka_answers,
            stopper("kafka"),
        )
        _kafka.warm_up(ports["kafka"], KAFKA_09_PROPERTIES, timeout)
        _timed("kafka", began, ports["kafka"])
    except BaseException:
        logger.error("sandbox startup failed: stopping what was started")
        for service, started in processes_to_stop(
            {name: [pid] for name, pid in pids.items()},
            {pid: ProcessState.OURS for pid in pids.values()},
        ):
            _state.stop_one(service, started, markers[service], location)
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
    _state.write_atomically(state_dir / _state.STATE_FILE, connection.to_json())
    return connection


def healthy(state_dir: Path, connection: SandboxConnection) -> bool:
    """Whether every recorded server is still ours and answers."""
    location = _state.location(state_dir, connection)
    markers = _state.markers(state_dir, location)
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


class _PortConflict(SandboxError):
    """A server ended before it answered, or another program listens on its port."""


def _launch(
    state_dir: Path,
    service: str,
    ports: dict[str, int],
    pids: dict[str, int],
    timeout: float,
    spawn: Callable[[int], int],
    answers: Callable[[int, int], bool],
    stop: Callable[[int], None],
) -> None:
    """Spawn a server and wait until it answers; on a port conflict, once more on a new port."""
    for attempt in (1, 2):
        pid = pids[service] = spawn(ports[service])
        _state.record_pid(state_dir, service, pid)
        ready = functools.partial(answers, pid, ports[service])
        try:
            _await(state_dir, service, pid, ports[service], timeout, ready)
            return
        except _PortConflict:
            if attempt == 2:
                raise
            stop(pid)
        port = _process.allocate_port()
        while port in ports.values():
            port = _process.allocate_port()
        logger.warning(
            "%s could not use port %d: retrying on port %d",
            service,
            ports[service],
            port,
        )
        ports[service] = port


def _await(
    state_dir: Path,
    service: str,
    pid: int,
    port: int,
    timeout: float,
    ready: Callable[[], bool],
) -> None:
    log_file = str(_state.log_file(state_dir, service))

    def check() -> bool:
        if not _process.is_running(pid):
            raise _PortConflict(f"{service} (pid {pid}) exited during startup: see {log_file!r}")
        if _process.taken_by_another(pid, port):
            # Kafka 0.9 does not even exit when its port is taken: it hangs.
            raise _PortConflict(f"another program listens on {service}'s port {port}")
        return ready()

    if not _process.wait_until(check, timeout, interval=0.25):
        raise SandboxError(
            f"{service} (pid {pid}) did not answer within {timeout:.0f} s: see {log_file!r}"
        )


def _timed(service: str, began: float, port: int) -> float:
    now = time.monotonic()
    logger.info("%s ready on 127.0.0.1:%d in %.1f s", service, port, now - began)
    return now


def _current(connection: SandboxConnection) -> SandboxConnection:
    """The record as written now (a restart changes the broker's PID)."""
    state_file = Path(connection.state_dir) / _state.STATE_FILE
    return SandboxConnection.from_json(state_file.read_text(encoding="utf-8"), str(state_file))


def stop_kafka(connection: SandboxConnection) -> None:
    """Stop only the broker (failure tests: Kafka going away under a running relay)."""
    connection = _current(connection)
    state_dir = Path(connection.state_dir)
    location = _state.location(state_dir, connection)
    marker = _state.markers(state_dir, location)["kafka"]
    _state.stop_one("kafka", connection.pids["kafka"], marker, location)


def _start_again(
    connection: SandboxConnection,
    service: str,
    timeout: float,
    spawn: Callable[[dict[str, int], int], int],
    answers: Callable[[int, int], bool],
    where: PostgresLocation,
) -> SandboxConnection:
    """Start one stopped service on its recorded port; record and return its new PID."""
    state_dir = Path(connection.state_dir)
    marker = _state.markers(state_dir, where)[service]
    ports, pids = dict(connection.ports), dict(connection.pids)

    def stop(pid: int) -> None:
        _state.stop_one(service, pid, marker, where)

    _launch(
        state_dir, service, ports, pids, timeout, functools.partial(spawn, ports), answers, stop
    )
    if ports[service] != connection.ports[service]:
        stop(pids[service])
        raise SandboxError(
            f"{service}'s port {connection.ports[service]} was taken meanwhile; restart the sandbox"
        )
    updated = dataclasses.replace(connection, pids=pids)
    _state.write_atomically(state_dir / _state.STATE_FILE, updated.to_json())
    return updated


def start_kafka(connection: SandboxConnection, timeout: float = 90.0) -> SandboxConnection:
    """Start the broker again on its recorded port; returns (and records) the new PID."""
    connection = _current(connection)
    state_dir = Path(connection.state_dir)

    def spawn(ports: dict[str, int], port: int) -> int:
        _kafka.forget_previous_broker(ports["zookeeper"])
        log_file = _state.log_file(state_dir, "kafka")
        return _kafka.start(state_dir, port, ports["zookeeper"], log_file)

    def answers(pid: int, port: int) -> bool:
        return _kafka.answers(pid, port, KAFKA_09_PROPERTIES)

    location = _state.location(state_dir, connection)
    updated = _start_again(connection, "kafka", timeout, spawn, answers, location)
    _kafka.warm_up(updated.ports["kafka"], KAFKA_09_PROPERTIES, timeout)
    return updated


def restart_postgres(connection: SandboxConnection, timeout: float = 60.0) -> SandboxConnection:
    """Fast-stop PostgreSQL and start it again on its port (failure tests: a server restart
    under running processes); returns (and records) the new PID."""
    connection = _current(connection)
    state_dir = Path(connection.state_dir)
    user = _postgres.server_user()
    location = _state.location(state_dir, connection, user)
    marker = _state.markers(state_dir, location)["postgres"]
    _state.stop_one("postgres", connection.pids["postgres"], marker, location)

    def spawn(_ports: dict[str, int], port: int) -> int:
        return _postgres.start(location, user, port, _state.log_file(state_dir, "postgres"))

    answers = functools.partial(_postgres.answers, location)
    return _start_again(connection, "postgres", timeout, spawn, answers, location)
