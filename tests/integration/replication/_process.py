"""Running ``pgshovel-replicate`` (the real CLI) as a subprocess that tests can kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml


def write_replication_yml(
    path: Path,
    kafka_config: Mapping[str, str],
    topic: str,
    target: Mapping[str, Any],
    max_batch_messages: int = 40,
) -> Path:
    properties = {key: value for key, value in kafka_config.items() if key != "bootstrap.servers"}
    path.write_text(
        yaml.safe_dump(
            {
                "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": False}},
                "loader": {
                    "path": "pgshovel.replication.loaders:PostgresSnapshotLoader",
                    "configuration": {"ranges_per_table": 16},
                },
                "stream": {
                    "path": "pgshovel.replication.streams:KafkaStream",
                    "configuration": {
                        "bootstrap_servers": kafka_config["bootstrap.servers"],
                        "topic": topic,
                        "properties": properties,
                        "max_batch_messages": max_batch_messages,
                    },
                },
                "target": dict(target),
            }
        )
    )
    return path


def wait_for(
    condition: Callable[[], bool],
    what: str,
    worker: WorkerProcess | None = None,
    seconds: float = 120.0,
) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if worker is not None and worker.process.poll() is not None:
            raise AssertionError(
                f"the worker exited ({worker.process.returncode}) while waiting for {what}: "
                f"{worker.log_path.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class WorkerProcess:
    """``pgshovel-replicate`` in its own process group (Spark's JVM and workers die with it)."""

    def __init__(self, configuration: Path, cluster: str, zookeeper_hosts: str, log: Path) -> None:
        self.log_path = log
        self.log = log.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from pgshovel.replication.cli import main; main()",
                "--cluster",
                cluster,
                "--zookeeper-hosts",
                zookeeper_hosts,
                str(configuration),
                "set",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.log.close()

    def ensure_stopped(self) -> None:
        """Kill the worker's process group if it still runs (a test failed half way)."""
        if self.process.poll() is None:
            self.kill()
        elif not self.log.closed:
            self.log.close()

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=120)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # leftovers of the group, if any
        except ProcessLookupError:
            pass
        self.log.close()
        return code
