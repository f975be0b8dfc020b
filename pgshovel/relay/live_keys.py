"""Read a table topic back: the keys it holds a row for, each with its last value.

A TRUNCATE deletes every row of a table, but the relay only sees the statement:
the keys to delete are the ones the table topic still holds a row for. They
are found by folding the topic from its earliest to its current end offset,
every partition, the last message of a key winning and a tombstone deleting
it. The table-topics output flushes everything produced before it asks, so
the fold includes the batch so far. The relay's ``KafkaProducer`` offers
these reads to the table topics as their ``TopicReader``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pgshovel._kafka_log import kafka_logger
from pgshovel.errors import BrokerUnavailable
from pgshovel.stream.reader import consumer_settings

__all__ = ["holds_messages", "live_keys"]

logger = logging.getLogger(__name__)


def live_keys(
    bootstrap_servers: str,
    properties: Mapping[str, Any],
    topic: str,
    timeout: float = 60.0,
) -> dict[bytes, bytes]:
    """Every key of ``topic`` whose last message is not a tombstone, with that message."""
    settings = consumer_settings(bootstrap_servers, properties)
    settings["group.id"] = "pgshovel-relay-truncate"
    settings["auto.offset.reset"] = "earliest"
    consumer = Consumer(settings, logger=kafka_logger(__name__))
    try:
        # The whole cluster's metadata: asking for one missing topic may create it.
        metadata = consumer.list_topics(timeout=timeout)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return {}
        ends: dict[int, int] = {}
        assignment = []
        for partition in found.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout, cached=False
            )
            if high > low:
                ends[partition] = high
                assignment.append(TopicPartition(topic, partition, low))
        if not assignment:
            return {}
        consumer.assign(assignment)
        return _fold(consumer, topic, ends, timeout)
    except KafkaException as error:
        raise BrokerUnavailable(f"reading table topic {topic!r} back failed: {error}") from error
    finally:
        consumer.close()


def holds_messages(
    bootstrap_servers: str,
    properties: Mapping[str, Any],
    topic: str,
    timeout: float = 60.0,
) -> bool:
    """Whether ``topic`` exists and some partition of it holds a message."""
    settings = consumer_settings(bootstrap_servers, properties)
    settings["group.id"] = "pgshovel-relay-snapshot"
    consumer = Consumer(settings, logger=kafka_logger(__name__))
    try:
        metadata = consumer.list_topics(timeout=timeout)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return False
        for partition in found.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout, cached=False
            )
            if high > low:
                return True
        return False
    except KafkaException as error:
        raise BrokerUnavailable(
            f"reading the offsets of topic {topic!r} failed: {error}"
        ) from error
    finally:
        consumer.close()


def _fold(
    consumer: Consumer, topic: str, ends: dict[int, int], timeout: float
) -> dict[bytes, bytes]:
    """Read the assigned partitions up to ``ends`` (partition -> end offset), folding by key."""
    live: dict[bytes, bytes] = {}
    deadline = time.monotonic() + timeout
    while ends:
        if time.monotonic() > deadline:
            raise BrokerUnavailable(
                f"reading table topic {topic!r} back for a truncate took more than "
                f"{timeout}s; is the broker reachable?"
            )
        for record in consumer.consume(num_messages=10_000, timeout=0.5):
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise BrokerUnavailable(f"reading table topic {topic!r} failed: {error}")
            partition, offset = record.partition(), record.offset()
            key = record.key()
            if key is not None:
                value = record.value()
                if value is None:
                    live.pop(key, None)
                else:
                    live[key] = value
            if partition in ends and offset is not None and offset + 1 >= ends[partition]:
                del ends[partition]
    return live
