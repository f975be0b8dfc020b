"""The Kafka writer: publishes a batch's messages in order and returns once all are acked.

Ordering and durability settings (the user's ``properties`` win where they
overlap; an empty one is left out, see ``pgshovel._kafka_properties``):
``acks=all``; ``enable.idempotence=true`` when the broker speaks the modern
protocol, otherwise (a client configured with ``api.version.request=false``,
i.e. a broker older than 0.10) one request in flight per connection so a retry
can never reorder messages. Messages are produced asynchronously by ``push``
and waited for once per batch by ``flush``: never a synchronous round trip per
message.

After a failed ``push`` or ``flush`` the writer purges what it still holds and the relay
starts a new publisher identity, so readers see the old publisher's open batch
abandoned and the batch re-sent from sequence 0 of the new one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from pgshovel._kafka_properties import client_properties
from pgshovel.errors import BrokerUnavailable, ProgrammingError
from pgshovel.protocol import stream_pb2
from pgshovel.settings import NonEmptyText, PositiveSeconds
from pgshovel.stream.last_batch import last_committed_begin
from pgshovel.stream.reader import KafkaReader

logger = logging.getLogger(__name__)

_LEGACY_FLAGS = {"false", "0", "no", "off"}


def producer_settings(bootstrap_servers: str, properties: Mapping[str, Any]) -> dict[str, str]:
    """The librdkafka configuration for an ordered, durable producer."""
    settings: dict[str, str] = {
        "bootstrap.servers": bootstrap_servers,
        "acks": "all",
        "linger.ms": "5",
        "batch.num.messages": "10000",
        "queue.buffering.max.messages": "1000000",
        "queue.buffering.max.kbytes": "1048576",
        # No per-message timeout: a timed-out message followed by a delivered one
        # would leave a sequence gap. ``push`` bounds the wait instead and purges
        # the tail, so what reached Kafka is always a prefix of what was produced.
        "message.timeout.ms": "0",
        "socket.keepalive.enable": "true",
    }
    user = client_properties(properties)
    legacy = user.get("api.version.request", "true").lower() in _LEGACY_FLAGS
    if legacy:
        settings["max.in.flight.requests.per.connection"] = "1"
        settings["enable.idempotence"] = "false"
    else:
        settings["enable.idempotence"] = "true"
    settings.update(user)
    if settings.get("acks") not in ("all", "-1"):
        logger.warning("acks=%s: the relay can lose acknowledged batches", settings["acks"])
    return settings


class KafkaWriter:
    """A ``StreamWriter`` for one Kafka topic (single partition, total order)."""

    def __init__(
        self,
        bootstrap_servers: NonEmptyText,
        topic: NonEmptyText | None = None,
        properties: Mapping[str, Any] | None = None,
        flush_timeout: PositiveSeconds = 60.0,
    ) -> None:
        self.topic = topic
        self.flush_timeout = flush_timeout
        self._settings = producer_settings(bootstrap_servers, properties or {})
        self._reader_settings = (bootstrap_servers, dict(properties or {}))
        self._producer: Producer | None = None
        self._failure: KafkaError | None = None
        self._bytes = 0
        self._pending = 0

    def bind(self, default_topic: str) -> None:
        """Called by the relay with ``<cluster>.<set>``; a configured topic wins."""
        if self.topic is None:
            self.topic = default_topic

    @property
    def bytes_sent(self) -> int:
        return self._bytes

    def _delivered(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None and self._failure is None:
            self._failure = error

    def _ensure_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._settings, logger=logger)
        return self._producer

    def push(self, messages: Sequence[stream_pb2.Message]) -> None:
        """Produce every message asynchronously, in order (see ``flush``)."""
        if self.topic is None:
            raise ProgrammingError("kafka writer has no topic: bind() was not called")
        producer = self._ensure_producer()
        produce = producer.produce
        callback = self._delivered
        topic = self.topic
        size = 0
        try:
            for message in messages:
                payload = message.SerializeToString()
                size += len(payload)
                while True:
                    try:
                        produce(topic, payload, on_delivery=callback)
                        break
                    except BufferError:
                        # The local queue is full: let deliveries drain, then retry.
                        producer.poll(0.1)
                if self._failure is not None:
                    break
            producer.poll(0)
        except KafkaException as error:
            self.reset()
            raise BrokerUnavailable(f"kafka produce to {topic!r} failed: {error}") from error
        self._pending += size
        self._raise_failure()

    def flush(self) -> None:
        """Wait until every pushed message is acknowledged; raise if one was not."""
        if self._producer is None:
            return
        remaining = self._producer.flush(self.flush_timeout)
        self._raise_failure()
        if remaining:
            self.reset()
            raise BrokerUnavailable(
                f"kafka did not acknowledge {remaining} message(s) on {self.topic!r} "
                f"within {self.flush_timeout}s; is the broker reachable?"
            )
        self._bytes += self._pending
        self._pending = 0

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            self.reset()
            raise BrokerUnavailable(
                f"kafka did not acknowledge a message on {self.topic!r}: {failure}"
            )

    def reset(self) -> None:
        """Drop the producer (and whatever it still queues) after a failure."""
        if self._producer is not None:
            self._producer.purge(in_queue=True, in_flight=True)
            self._producer.flush(0)
            self._producer = None
        # The purge reports every dropped message as failed: those reports
        # belong to the abandoned attempt, not to the next one.
        self._failure = None
        self._pending = 0

    def last_committed_begin(self) -> stream_pb2.Message | None:
        if self.topic is None:
            raise ProgrammingError("kafka writer has no topic: bind() was not called")
        bootstrap_servers, properties = self._reader_settings
        reader = KafkaReader(bootstrap_servers, self.topic, properties, timeout=self.flush_timeout)
        try:
            return last_committed_begin(reader)
        finally:
            reader.close()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.flush_timeout)
            self._producer = None
