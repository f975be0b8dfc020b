"""Running ``pgshovel-replicate`` (the real CLI) as a subprocess that tests can kill -9."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pgshovel.sandbox import ChildProcess


def write_replication_yml(
    path: Path,
    kafka_config: Mapping[str, str],
    topic: str,
    target: Mapping[str, Any],
    max_batch_messages: int = 40,
    part_mutations: int = 20000,
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
                        "part_mutations": part_mutations,
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


class WorkerProcess(ChildProcess):
    """``pgshovel-replicate`` in its own process group (Spark's JVM and workers die with it)."""

    def __init__(self, configuration: Path, cluster: str, zookeeper_hosts: str, log: Path) -> None:
        command = [
            sys.executable,
            "-c",
            "from pgshovel.replication.cli import main; main()",
            "--cluster",
            cluster,
            "--zookeeper-hosts",
            zookeeper_hosts,
            str(configuration),
            "set",
        ]
        super().__init__("pgshovel-replicate", command, log)

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM (stop after the current micro-batch); return the exit code."""
        return super().stop(timeout)
