"""The sandbox's Spark standalone cluster as pure data: where Spark is, commands, the record.

The cluster runs from the pyspark package's own jars (``$SPARK_HOME`` when set,
as pyspark itself does): ``bin/spark-class`` starts a ``Master`` and each
``Worker`` on 127.0.0.1, every process with a properties file of its own under
``<state_dir>/spark`` whose path only its command line holds (so a recorded PID
is only signalled while it is still that process). Daemons get small heaps;
the executors a worker launches get what ``--memory`` offers (an application's
``spark.executor.memory``, 1g by default, must fit into it). ``spark.json``
records the processes (:class:`SparkCluster`); nothing here starts or stops
anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pgshovel.errors import SandboxError

HOST = "127.0.0.1"
MASTER = "master"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

DEFAULT_WORKER_CORES = 1
DEFAULT_WORKER_MEMORY = "1g"
#: heap of the Master and Worker JVMs themselves (they only schedule)
DAEMON_MEMORY = "256m"
DAEMON_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:-UsePerfData"

#: Both daemons: a port that is taken ends the process (the sandbox picks another)
#: instead of Spark silently binding the next one; the master's REST submission
#: server stays off (it would take the fixed port 6066 of every sandbox on the machine).
DAEMON_PROPERTIES: dict[str, str] = {
    "spark.port.maxRetries": "0",
    "spark.master.rest.enabled": "false",
}

_MEMORY = re.compile(r"[1-9][0-9]*[mg]")


#: the daemons' PID files in the state directory (``spark-master.pid``, ``spark-worker-1.pid``)
PID_FILES = "spark-*.pid"


def service(name: str) -> str:
    """``spark-master``, ``spark-worker-1``: the name of its log and PID file in the state dir."""
    return f"spark-{name}"


def daemon_of_pid_file(file_name: str) -> str:
    """``spark-worker-1.pid`` -> ``worker-1``."""
    return file_name.removeprefix("spark-").removesuffix(".pid")


def worker_names(count: int) -> list[str]:
    return [f"worker-{number}" for number in range(1, count + 1)]


def master_url(port: int) -> str:
    return f"spark://{HOST}:{port}"


def spark_directory(state_dir: Path) -> Path:
    return state_dir / "spark"


def properties_path(state_dir: Path, name: str) -> Path:
    """The process's own properties file: the marker only its command line holds."""
    return spark_directory(state_dir) / f"{name}.properties"


def work_directory(state_dir: Path, name: str) -> Path:
    """A worker's ``--work-dir``: its executors' directories and logs (``app-*/N/stderr``)."""
    return spark_directory(state_dir) / name


def conf_directory(state_dir: Path) -> Path:
    """An empty ``SPARK_CONF_DIR``: no ``spark-env.sh`` or defaults of the host's Spark leak in."""
    return spark_directory(state_dir) / "conf"


def check_memory(memory: str) -> str:
    """``512m``, ``1g``, ...: what ``Worker --memory`` accepts; anything else is an error."""
    normalized = memory.strip().lower()
    if not _MEMORY.fullmatch(normalized):
        raise SandboxError(
            f"spark worker memory {memory!r}: use a whole number of megabytes or gigabytes, "
            "e.g. 512m or 1g"
        )
    return normalized


def spark_home(environ: Mapping[str, str], pyspark_directory: Path | None) -> Path:
    """``$SPARK_HOME`` if set, else the installed pyspark package (which carries Spark's jars)."""
    configured = environ.get("SPARK_HOME", "")
    if configured:
        home, origin = Path(configured), "SPARK_HOME"
    elif pyspark_directory is not None:
        home, origin = pyspark_directory, "the pyspark package"
    else:
        raise SandboxError(
            "a spark cluster needs pyspark, which is not installed: "
            "pip install 'pgshovel[spark]' (or set SPARK_HOME to a Spark installation)"
        )
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise SandboxError(
            f"{origin} ({str(home)!r}) has no bin/spark-class and jars/: "
            "reinstall pyspark or point SPARK_HOME at a Spark 4 installation"
        )
    return home


def daemon_environment(
    base: Mapping[str, str], home: Path, conf_dir: Path, python: str
) -> dict[str, str]:
    """The environment of the Master and Worker processes (and so of the executors)."""
    environment = dict(base)
    environment.update(
        {
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf_dir),
            # Every service, web UI included, binds loopback only.
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTIONS,
            # Executors run pgshovel from this virtualenv (a driver's PYSPARK_PYTHON wins).
            "PYSPARK_PYTHON": python,
        }
    )
    return environment


def master_command(home: Path, port: int, webui_port: int, properties: Path) -> list[str]:
    return [
        str(home / "bin" / "spark-class"),
        MASTER_CLASS,
        "--host",
        HOST,
        "--port",
        str(port),
        "--webui-port",
        str(webui_port),
        "--properties-file",
        str(properties),
    ]


def worker_command(
    home: Path,
    master: str,
    port: int,
    cores: int,
    memory: str,
    work_dir: Path,
    properties: Path,
) -> list[str]:
    return [
        str(home / "bin" / "spark-class"),
        WORKER_CLASS,
        "--host",
        HOST,
        "--port",
        str(port),
        "--webui-port",
        "0",  # any free port: nobody needs a worker's page
        "--cores",
        str(cores),
        "--memory",
        memory,
        "--work-dir",
        str(work_dir),
        "--properties-file",
        str(properties),
        master,
    ]


def alive_worker_ports(master_status: Mapping[str, Any]) -> set[int]:
    """The ports of the workers the master's ``/json/`` page lists as ALIVE."""
    workers = master_status.get("workers")
    if not isinstance(workers, list):
        return set()
    return {
        int(worker["port"])
        for worker in workers
        if isinstance(worker, dict)
        and worker.get("state") == "ALIVE"
        and isinstance(worker.get("port"), int)
    }


@dataclass(frozen=True)
class DaemonStatus:
    """One daemon as ``status`` reports it: ``spark-master``, ``spark-worker-N``."""

    name: str
    pid: int
    port: int
    running: bool


@dataclass(frozen=True)
class SparkProcess:
    """One daemon of the cluster: ``master`` or ``worker-N``, its PID, RPC port and log."""

    name: str
    pid: int
    port: int
    log: str


@dataclass(frozen=True)
class SparkCluster:
    """A sandbox's Spark standalone cluster as ``spark.json`` records it.

    ``master_url`` is what ``spark.master`` takes; ``webui_port`` serves the
    master's status (``http://127.0.0.1:PORT/json/``); each worker offers
    ``cores`` cores and ``memory`` to executors.
    """

    state_dir: str
    master_url: str
    webui_port: int
    cores: int
    memory: str
    master: SparkProcess
    workers: dict[str, SparkProcess]

    def processes(self) -> list[SparkProcess]:
        """The master, then the workers by name."""
        return [self.master, *(self.workers[name] for name in sorted(self.workers))]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, origin: str) -> SparkCluster:
        """Parse what :meth:`to_json` wrote; a damaged file is a :class:`SandboxError`."""
        try:
            data = json.loads(text)
            return cls(
                state_dir=str(data["state_dir"]),
                master_url=str(data["master_url"]),
                webui_port=int(data["webui_port"]),
                cores=int(data["cores"]),
                memory=str(data["memory"]),
                master=SparkProcess(**data["master"]),
                workers={
                    str(name): SparkProcess(**fields) for name, fields in data["workers"].items()
                },
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise SandboxError(
                f"cannot read {origin!r} ({error!r}): run 'pgshovel-sandbox spark down' (it "
                "stops the daemons its PID files name), then 'up --spark-workers N' again"
            ) from error
