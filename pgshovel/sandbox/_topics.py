"""The Kafka 0.9 broker's own admin tools run against the sandbox: topics made as an operator must.

A 0.9 broker creates a topic on first write with one partition and cannot be
asked for more over the protocol, so a partitioned set topic (``partitions:
N`` in relay.yml) or a compacted table topic is created first with
kafka-topics.sh, and a topic's settings change with kafka-configs.sh, both
shipped with the broker and run against the sandbox's ZooKeeper chroot.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox._connection import SandboxConnection
from pgshovel.sandbox._java import java_executable, kafka_libs
from pgshovel.sandbox._render import KAFKA_CHROOT

__all__ = ["create_topic", "kafka_tool"]


def kafka_tool(
    sandbox: SandboxConnection, tool: str, arguments: Sequence[str], answer: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the broker's ``bin/<tool>`` (e.g. kafka-configs.sh) against the sandbox's
    ZooKeeper with ``arguments``, ``answer`` on its standard input; its result, unchecked."""
    command = [
        str(kafka_libs().parent / "bin" / tool),
        "--zookeeper",
        f"{sandbox.zookeeper_hosts}{KAFKA_CHROOT}",
        *arguments,
    ]
    java_home = str(Path(java_executable()).resolve().parent.parent)
    return subprocess.run(
        command,
        input=answer,
        capture_output=True,
        text=True,
        env={**os.environ, "JAVA_HOME": java_home},
        timeout=120,
        check=False,
    )


def create_topic(
    sandbox: SandboxConnection, topic: str, partitions: int = 1, compact: bool = False
) -> None:
    """Create ``topic`` with ``partitions`` partitions (compacted with ``compact``)."""
    arguments = ["--create", "--topic", topic, "--partitions", str(partitions)]
    arguments += ["--replication-factor", "1"]
    if compact:
        arguments += ["--config", "cleanup.policy=compact"]
    result = kafka_tool(sandbox, "kafka-topics.sh", arguments)
    if result.returncode != 0 or "Created topic" not in result.stdout:
        output = " ".join((result.stdout + result.stderr).split())[-400:]
        raise SandboxError(
            f"kafka-topics.sh could not create topic {topic!r} with {partitions} partitions "
            f"(exit status {result.returncode}): {output}; is the sandbox's Kafka running "
            "(pgshovel-sandbox status)?"
        )
