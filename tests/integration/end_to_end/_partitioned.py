"""A partitioned set topic end to end: the relay with ``partitions: N``, each partition's place.

The sandbox's Kafka 0.9 broker cannot create a topic with partitions on request,
so the topic is created first with kafka-topics.sh (as an operator of such a
broker has to), then the relay writes it with ``partitions: N``. "Caught up" is
judged per partition: the relay drained the PgQ queue and the position the
worker stored with its data is at the end of every partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from confluent_kafka import Consumer, TopicPartition

from tests.integration.capture._capture import SET
from tests.integration.relay._relay import RelayProcess, queue_drained, write_relay_yml
from tests.integration.relay._table_topics import create_topic
from tests.stored_state import postgres_state

from ._scenario import Scenario
from ._stack import WorkerProcess, wait_until


def create_partitioned_topic(scenario: Scenario, partitions: int) -> None:
    create_topic(scenario.sandbox, scenario.topic, partitions=partitions)


def start_partitioned_relay(scenario: Scenario, partitions: int) -> RelayProcess:
    """A new relay writing ``partitions`` partitions; returns once it leads the set."""
    config = write_relay_yml(scenario.directory, scenario.sandbox)
    document = yaml.safe_load(config.read_text())
    document["writer"]["configuration"]["partitions"] = partitions
    document["writer"]["configuration"]["max_message_bytes"] = 4096
    config.write_text(yaml.safe_dump(document))
    scenario.relays += 1
    relay = RelayProcess(
        scenario.sandbox,
        scenario.cluster,
        config,
        scenario.directory / f"relay-{scenario.relays}.log",
    )
    scenario.processes.append(relay)
    wait_until(
        lambda: "leading" in relay.output(), "the relay to lead", 60, relay.alive, relay.output
    )
    return relay


def partition_ends(kafka_config: Mapping[str, str], topic: str, partitions: int) -> list[int]:
    consumer = Consumer({**kafka_config, "group.id": "pgshovel-e2e", "enable.auto.commit": "false"})
    try:
        return [
            int(consumer.get_watermark_offsets(TopicPartition(topic, number), timeout=10)[1])
            for number in range(partitions)
        ]
    finally:
        consumer.close()


def stored_offsets(target: str, cluster: str) -> list[int] | None:
    """The next offset of every partition in the stored position, None before streaming."""
    state = postgres_state(target, cluster, SET)
    if state is None or state.phase != "streaming" or not state.position.consumed:
        return None
    return [cursor.next_offset for cursor in state.position.partitions]


def applied_messages(target: str, cluster: str) -> int:
    return sum(stored_offsets(target, cluster) or [0])


def wait_partitions_caught_up(
    scenario: Scenario, worker: WorkerProcess, target: str, partitions: int, timeout: float = 240
) -> None:
    """The relay drained the queue and the worker's position is at every partition's end."""
    wait_until(
        lambda: queue_drained(scenario.source, scenario.cluster), "the relay to drain", timeout
    )
    ends = partition_ends(scenario.kafka_config, scenario.topic, partitions)
    wait_until(
        lambda: all(
            stored >= end
            for stored, end in zip(
                stored_offsets(target, scenario.cluster) or [-1] * partitions, ends, strict=True
            )
        ),
        f"the worker to apply every partition up to {ends}",
        timeout,
        worker.alive,
        worker.output,
    )


def replication_yml(path: Path, scenario: Scenario, target: str, **stream: object) -> Path:
    from ._stack import write_replication_yml

    written = write_replication_yml(
        path,
        scenario.kafka_config,
        scenario.topic,
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target},
        },
    )
    document = yaml.safe_load(written.read_text())
    document["stream"]["configuration"].update(stream)
    written.write_text(yaml.safe_dump(document))
    return written
