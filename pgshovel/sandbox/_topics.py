"""Topics created on the sandbox's Kafka 0.9 broker the way its operator has to: kafka-topics.sh.

A 0.9 broker creates a topic on first write with one partition and cannot be
asked for more over the protocol, so a partitioned set topic (``partitions:
N`` in relay.yml) or a compacted table topic is created first with the tool
that ships with the broker, run against the sandbox's ZooKeeper chroot.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox._connection import SandboxConnection
from pgshovel.sandbox._java import java_executable, kafka_libs
from pgshovel.sandbox._render import KAFKA_CHROOT

__all__ = ["create_topic"]


def create_topic(
    sandbox: SandboxConnection, topic: str, partitions: int = 1, compact: bool = False
) -> None:
    """Create ``topic`` with ``partitions`` partitions (compacted with ``compact``)."""
    tool = kafka_libs().parent / "bin" / "kafka-topics.sh"
    command = [
        str(tool),
        "--zookeeper",
        f"{sandbox.zookeeper_hosts}{KAFKA_CHROOT}",
        "--create",
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        "--replication-factor",
        "1",
    ]
    if compact:
        command += ["--config", "cleanup.policy=compact"]
    java_home = str(Path(java_executable()).resolve().parent.parent)
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "JAVA_HOME": java_home},
        timeout=120,
        check=False,
    )
    if result.returncode != 0 or "Created topic" not in result.stdout:
        output = " ".join((result.stdout + result.stderr).split())[-400:]
        raise SandboxError(
            f"kafka-topics.sh could not create topic {topic!r} with {partitions} partitions "
            f"(exit status {result.returncode}): {output}; is the sandbox's Kafka running "
            "(pgshovel-sandbox status)?"
        )
