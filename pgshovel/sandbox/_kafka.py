"""The sandbox's Kafka 0.9.0.1 broker: start ``kafka.Kafka``, wait for metadata, warm up.

"Ready" means a client with the sandbox's properties sees broker 0 in the
metadata, and a keyed message produced to a warm-up topic comes back through a
consumer group; that also creates the group coordinator's offsets topic, so the
first test that consumes does not pay for it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _java, _process
from pgshovel.sandbox._render import (
    KAFKA_CHROOT,
    kafka_command,
    kafka_log4j,
    kafka_settings,
    render_properties,
)

logger = logging.getLogger(__name__)

WARMUP_TOPIC = "pgshovel-sandbox-warmup"
# librdkafka warns on every client that the 0.9 properties are deprecated; the
# sandbox's own short-lived clients only report errors.
_QUIET = {"log_level": 3}


def config_path(state_dir: Path) -> Path:
    return state_dir / "kafka" / "server.properties"


def start(state_dir: Path, port: int, zookeeper_port: int, log_file: Path) -> int:
    config = config_path(state_dir)
    log_dir = config.parent / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    config.write_text(
        render_properties(kafka_settings(log_dir, port, zookeeper_port)), encoding="utf-8"
    )
    log4j = config.parent / "log4j.properties"
    log4j.write_text(kafka_log4j(), encoding="utf-8")
    command = kafka_command(_java.java_executable(), _java.kafka_libs(), config, log4j)
    return _process.spawn(command, log_file, cwd=config.parent)


def forget_previous_broker(zookeeper_port: int) -> None:
    """Delete the ephemeral registration a crashed broker may have left in ZooKeeper.

    After a crash the old session lives on until it times out, and a 0.9 broker
    that finds ``/brokers/ids/0`` taken refuses to start.
    """
    client = KazooClient(hosts=f"127.0.0.1:{zookeeper_port}", timeout=10.0)
    try:
        client.start(timeout=15.0)
        for path in (f"{KAFKA_CHROOT}/brokers/ids/0", f"{KAFKA_CHROOT}/controller"):
            try:
                client.delete(path)
                logger.info("removed stale zookeeper node %s", path)
            except NoNodeError:
                pass
    except KazooException as error:
        raise SandboxError(
            f"cannot clean the stale kafka registration in zookeeper port {zookeeper_port}: {error}"
        ) from error
    finally:
        client.stop()
        client.close()


def answers(pid: int, port: int, properties: Mapping[str, str]) -> bool:
    """Whether our broker listens on ``port`` and lists itself in the cluster metadata."""
    if not _process.listens(pid, port):
        return False
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **properties, **_QUIET})
    try:
        metadata = producer.list_topics(timeout=3.0)
    except KafkaException:
        return False
    return any(broker.port == port for broker in metadata.brokers.values())


def warm_up(port: int, properties: Mapping[str, str], timeout: float) -> None:
    """Produce a keyed message and read it back through a consumer group."""
    config: dict[str, object] = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        **properties,
        **_QUIET,
    }
    token = uuid.uuid4().hex.encode()
    deadline = time.monotonic() + timeout
    errors: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            errors.append(str(error))

    producer = Producer({**config, "message.timeout.ms": int(timeout * 1000)})
    producer.produce(WARMUP_TOPIC, key=b"warm-up", value=token, on_delivery=delivered)
    if producer.flush(timeout) != 0 or errors:
        raise SandboxError(f"kafka did not accept a warm-up message: {errors or 'timed out'}")
    consumer = Consumer(
        {
            **config,
            "group.id": f"pgshovel-sandbox-{token.decode()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        }
    )
    try:
        consumer.subscribe([WARMUP_TOPIC])
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.value() == token:
                return
        raise SandboxError(f"kafka did not deliver the warm-up message within {timeout:.0f} s")
    finally:
        consumer.close()
