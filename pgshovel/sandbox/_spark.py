"""A Spark standalone cluster beside the sandbox: a Master and N Workers on 127.0.0.1.

``start`` brings the cluster to the shape asked for and is idempotent: a live
master is kept, a live worker of the same cores and memory is kept, a missing
or dead one is started (so after :func:`kill_worker` it starts a replacement),
workers beyond the count are stopped. Each daemon runs detached in its own
process group (the executors a worker launches are in that group, their Python
daemons in groups of their own that end when the executor's pipes close), on
a free port, with its log in ``<state_dir>/spark-<name>.log`` and its PID file
beside it; a worker's executors work (and log) under ``<state_dir>/spark/<name>``.
A daemon counts as started once the master's status page says so: the master
ALIVE, a worker registered and ALIVE. ``spark.json`` records the processes, and
``sandbox.json`` the master URL (``SandboxConnection.spark_master``, exported by
``pgshovel-sandbox env`` as ``PGSHOVEL_SPARK_MASTER``). ``stop`` ends workers,
then the master, by PID (SIGTERM: a worker kills its executors), then what is
left in their process groups; ``pgshovel-sandbox down`` does it too.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import importlib.util
import json
import logging
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _children, _process, _state
from pgshovel.sandbox._connection import SandboxConnection
from pgshovel.sandbox._plan import ProcessState
from pgshovel.sandbox._render import render_properties
from pgshovel.sandbox._spark_plan import (
    DAEMON_PROPERTIES,
    DEFAULT_WORKER_CORES,
    DEFAULT_WORKER_MEMORY,
    MASTER,
    PID_FILES,
    DaemonStatus,
    SparkCluster,
    SparkProcess,
    alive_worker_ports,
    check_memory,
    conf_directory,
    daemon_environment,
    daemon_of_pid_file,
    master_command,
    master_url,
    properties_path,
    service,
    spark_home,
    work_directory,
    worker_command,
    worker_names,
)
from pgshovel.sandbox._startup import _launch

logger = logging.getLogger(__name__)

RECORD = "spark.json"
DEFAULT_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0


def load(state_dir: Path) -> SparkCluster | None:
    """The cluster ``spark.json`` records (it may have stopped since), None without one."""
    path = Path(state_dir) / RECORD
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return SparkCluster.from_json(text, str(path))


def start(
    state_dir: Path,
    workers: int = 2,
    cores: int = DEFAULT_WORKER_CORES,
    memory: str = DEFAULT_WORKER_MEMORY,
    timeout: float = DEFAULT_TIMEOUT,
) -> SparkCluster:
    """Run a cluster of ``workers`` workers beside the sandbox in ``state_dir`` (see above)."""
    if workers < 1 or cores < 1:
        raise SandboxError(
            f"a spark cluster needs at least 1 worker of 1 core, not {workers}x{cores}"
        )
    memory = check_memory(memory)
    state_dir = Path(state_dir).resolve()
    with _state.locked(state_dir):
        connection = _connection(state_dir)
        try:
            return _reconcile(state_dir, workers, cores, memory, timeout)
        except BaseException:
            logger.error("spark cluster startup failed: stopping what this attempt started")
            _stop_unrecorded(state_dir)
            raise
        finally:
            with contextlib.suppress(SandboxError):  # sandbox.json names the master that runs
                running = load(state_dir)
                _record_master(state_dir, connection, running.master_url if running else "")


def stop(state_dir: Path) -> None:
    """Stop the cluster of the sandbox in ``state_dir`` (safe to repeat)."""
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return
    with _state.locked(state_dir):
        stop_recorded(state_dir)


def stop_recorded(state_dir: Path) -> None:
    """Stop every recorded daemon, workers first; the caller holds the state directory's lock."""
    try:
        cluster = load(state_dir)
    except SandboxError as error:
        logger.warning("stopping the spark daemons the PID files name: %s", error)
        cluster = None
    names = set() if cluster is None else {process.name for process in cluster.processes()}
    names.update(daemon_of_pid_file(path.name) for path in state_dir.glob(PID_FILES))
    recorded = {} if cluster is None else {p.name: p.pid for p in cluster.processes()}
    for name in sorted(names - {MASTER}) + ([MASTER] if MASTER in names else []):
        pids = _state.read_pid(_state.pid_file(state_dir, service(name)))
        if name in recorded:
            pids.add(recorded[name])
        for pid in pids:
            _stop_daemon(state_dir, name, pid)
        _state.pid_file(state_dir, service(name)).unlink(missing_ok=True)
    (state_dir / RECORD).unlink(missing_ok=True)
    if names:
        logger.info("stopped the spark cluster of %s", state_dir)
    with contextlib.suppress(SandboxError):
        _record_master(state_dir, _connection(state_dir), "")


def _stop_unrecorded(state_dir: Path) -> None:
    """Stop the daemons a PID file names but ``spark.json`` does not: a failed start's."""
    try:
        cluster = load(state_dir)
    except SandboxError:
        cluster = None
    recorded = {} if cluster is None else {p.name: p.pid for p in cluster.processes()}
    for path in state_dir.glob(PID_FILES):
        name = daemon_of_pid_file(path.name)
        for pid in _state.read_pid(path) - {recorded.get(name)}:
            _stop_daemon(state_dir, name, pid)
        if name in recorded:
            _state.record_pid(state_dir, service(name), recorded[name])
        else:
            path.unlink(missing_ok=True)


def terminate(cluster: SparkCluster) -> None:
    """Stop the daemons a record held in memory names, even if its state directory is gone."""
    state_dir = Path(cluster.state_dir)
    for process in reversed(cluster.processes()):  # workers first, the master last
        _stop_daemon(state_dir, process.name, process.pid)


def kill_worker(state_dir: Path, name: str) -> SparkProcess:
    """``kill -9`` of a worker's process group: the Worker JVM and the executors it launched.

    What a machine's crash does to its Spark processes; the driver loses the
    executor and runs its tasks again elsewhere. Returns the killed process.
    """
    state_dir = Path(state_dir).resolve()
    cluster = load(state_dir)
    process = None if cluster is None else cluster.workers.get(name)
    if process is None:
        known = [] if cluster is None else sorted(cluster.workers)
        raise SandboxError(f"no spark worker {name!r} in {str(state_dir)!r} (workers: {known!r})")
    marker = str(properties_path(state_dir, name))
    if _process.state_of(process.pid, marker) is ProcessState.OURS:
        logger.info("killing spark %s (pid %d) and its executors", name, process.pid)
        _children.signal_group(process.pid, signal.SIGKILL)
    _process.wait_until(lambda: not _children.group_alive(process.pid), _children.GRACE, 0.05)
    _process.wait_exited(process.pid, _children.GRACE)
    return process


def status(state_dir: Path) -> list[DaemonStatus]:
    """Per recorded daemon (``spark-master``, ``spark-worker-N``): PID, port, whether it runs."""
    cluster = load(state_dir)
    if cluster is None:
        return []
    return [
        DaemonStatus(service(p.name), p.pid, p.port, _is_ours(state_dir, p))
        for p in cluster.processes()
    ]


def _connection(state_dir: Path) -> SandboxConnection:
    path = state_dir / _state.STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise SandboxError(
            f"no sandbox in {str(state_dir)!r}: start one with "
            f"'pgshovel-sandbox up --state-dir {state_dir}' first"
        ) from error
    return SandboxConnection.from_json(text, str(path))


def _record_master(state_dir: Path, connection: SandboxConnection, url: str) -> None:
    if connection.spark_master != url:
        updated = dataclasses.replace(connection, spark_master=url)
        _state.write_atomically(state_dir / _state.STATE_FILE, updated.to_json())


def _is_ours(state_dir: Path, process: SparkProcess) -> bool:
    marker = str(properties_path(state_dir, process.name))
    return _process.state_of(process.pid, marker) is ProcessState.OURS


def _reconcile(
    state_dir: Path, workers: int, cores: int, memory: str, timeout: float
) -> SparkCluster:
    """Keep what runs as asked, start what is missing, stop what is not wanted.

    A live daemon is never restarted for answering slowly (a running
    application would lose its executors): it is waited for instead.
    """
    previous = load(state_dir)
    if previous is not None and not _is_ours(state_dir, previous.master):
        stop_recorded(state_dir)  # the master is gone: nothing of the cluster is kept
        previous = None
    if previous is None:
        cluster = _start_master(state_dir, cores, memory, timeout)
    else:
        cluster = dataclasses.replace(previous, cores=cores, memory=memory)
    wanted, shape = worker_names(workers), (workers, cores, memory)
    for name, process in sorted(cluster.workers.items()):
        keep = (
            previous is not None
            and name in wanted
            and (previous.cores, previous.memory) == (cores, memory)
            and _is_ours(state_dir, process)
        )
        if not keep:
            _stop_daemon(state_dir, name, process.pid)
            cluster = _without(state_dir, cluster, name)
    kept = {process.port for process in cluster.workers.values()}
    _await_registered(cluster, kept, timeout)
    missing = [name for name in wanted if name not in cluster.workers]
    if missing:
        # Side by side: each JVM takes seconds to start (more on a loaded machine).
        with concurrent.futures.ThreadPoolExecutor(len(missing)) as pool:
            started = list(
                pool.map(lambda name: _start_worker(state_dir, cluster, name, timeout), missing)
            )
        running = {**cluster.workers, **{process.name: process for process in started}}
        cluster = dataclasses.replace(cluster, workers=running)
        _write_record(state_dir, cluster)
    logger.info("spark cluster %s: %d worker(s) of %d core(s), %s", cluster.master_url, *shape)
    return cluster


def _await_registered(cluster: SparkCluster, ports: set[int], timeout: float) -> None:
    """Wait until the master answers ALIVE and lists the workers on ``ports`` as ALIVE."""

    def ready() -> bool:
        status = _master_status(cluster.webui_port)
        if status is None or status.get("status") != "ALIVE":
            return False
        return ports <= alive_worker_ports(status)

    if not _process.wait_until(ready, timeout, interval=0.5):
        raise SandboxError(
            f"the spark master {cluster.master_url} (pid {cluster.master.pid}) does not report "
            f"itself and its workers alive within {timeout:.0f} s: see {cluster.master.log!r}; "
            "run 'pgshovel-sandbox spark down', then 'pgshovel-sandbox up --spark-workers N'"
        )


def _start_master(state_dir: Path, cores: int, memory: str, timeout: float) -> SparkCluster:
    home = _spark_home()
    properties = _write_properties(state_dir, MASTER)
    webui = {"port": 0}

    def spawn(port: int) -> int:
        # A fresh UI port per attempt: with maxRetries 0 a taken one ends the master.
        webui["port"] = _free_port_except(port)
        command = master_command(home, port, webui["port"], properties)
        return _spawn(state_dir, MASTER, command, home)

    def answers(pid: int, port: int) -> bool:
        if not _process.listens(pid, port):
            return False
        status = _master_status(webui["port"])
        return status is not None and status.get("status") == "ALIVE"

    ports = {service(MASTER): _process.allocate_port()}
    pids: dict[str, int] = {}
    stopper = functools.partial(_stop_daemon, state_dir, MASTER)
    _launch(state_dir, service(MASTER), ports, pids, timeout, spawn, answers, stopper)
    port, pid = ports[service(MASTER)], pids[service(MASTER)]
    log = str(_state.log_file(state_dir, service(MASTER)))
    cluster = SparkCluster(
        state_dir=str(state_dir),
        master_url=master_url(port),
        webui_port=webui["port"],
        cores=cores,
        memory=memory,
        master=SparkProcess(MASTER, pid, port, log),
        workers={},
    )
    _write_record(state_dir, cluster)
    logger.info("spark master %s (pid %d) is alive", cluster.master_url, pid)
    return cluster


def _start_worker(
    state_dir: Path, cluster: SparkCluster, name: str, timeout: float
) -> SparkProcess:
    home = _spark_home()
    properties = _write_properties(state_dir, name)
    work_dir = work_directory(state_dir, name)
    work_dir.mkdir(parents=True, exist_ok=True)

    def spawn(port: int) -> int:
        command = worker_command(
            home, cluster.master_url, port, cluster.cores, cluster.memory, work_dir, properties
        )
        return _spawn(state_dir, name, command, home)

    def answers(pid: int, port: int) -> bool:
        if not _process.listens(pid, port):
            return False
        return port in alive_worker_ports(_master_status(cluster.webui_port) or {})

    ports = {service(name): _free_port_except(cluster.master.port, cluster.webui_port)}
    pids: dict[str, int] = {}
    stopper = functools.partial(_stop_daemon, state_dir, name)
    _launch(state_dir, service(name), ports, pids, timeout, spawn, answers, stopper)
    log = str(_state.log_file(state_dir, service(name)))
    process = SparkProcess(name, pids[service(name)], ports[service(name)], log)
    logger.info("spark %s (pid %d, port %d) registered", name, process.pid, process.port)
    return process


def _without(state_dir: Path, cluster: SparkCluster, name: str) -> SparkCluster:
    workers = {key: value for key, value in cluster.workers.items() if key != name}
    cluster = dataclasses.replace(cluster, workers=workers)
    _write_record(state_dir, cluster)
    return cluster


def _spawn(state_dir: Path, name: str, command: list[str], home: Path) -> int:
    conf_dir = conf_directory(state_dir)
    conf_dir.mkdir(parents=True, exist_ok=True)
    environment = daemon_environment(os.environ, home, conf_dir, sys.executable)
    log = _state.log_file(state_dir, service(name))
    return _process.spawn(command, log, cwd=state_dir, env=environment)


def _stop_daemon(state_dir: Path, name: str, pid: int) -> None:
    """SIGTERM (a worker kills its executors), then SIGKILL; then its group's leftovers."""
    marker = str(properties_path(state_dir, name))
    was_ours = _process.state_of(pid, marker) is ProcessState.OURS
    _process.stop_process(pid, marker, signal.SIGTERM, STOP_TIMEOUT)
    if was_ours:
        # Executors of a worker share its process group and may outlive it briefly.
        _children.end_group(pid)


def _write_properties(state_dir: Path, name: str) -> Path:
    path = properties_path(state_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_properties(DAEMON_PROPERTIES), encoding="utf-8")
    return path


def _write_record(state_dir: Path, cluster: SparkCluster) -> None:
    _state.write_atomically(state_dir / RECORD, cluster.to_json())


def _free_port_except(*taken: int) -> int:
    port = _process.allocate_port()
    while port in taken:
        port = _process.allocate_port()
    return port


def _spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return spark_home(os.environ, Path(locations[0]) if locations else None)


def _master_status(webui_port: int) -> dict[str, Any] | None:
    """The master's ``/json/`` status page, None while it does not answer."""
    url = f"http://127.0.0.1:{webui_port}/json/"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            document = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return document if isinstance(document, dict) else None
