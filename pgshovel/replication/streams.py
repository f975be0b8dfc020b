"""The Kafka stream: validated micro-batches of whole committed batches.

The reader runs on the Spark driver (the Spark Kafka connector is not
available offline, and one partition has one reader anyway): it reads the
partitions the stored position names from there, feeds every message to the
validating state machine and hands over the batches that reached Commit, so a
micro-batch of committed batches never holds part of a batch. Messages of a
batch still open stay in the validator until its Commit arrives in a later
read — up to ``part_mutations`` mutations: beyond that the open batch is handed
over in parts (a micro-batch of its own each), which the worker applies
uncommitted in one target transaction until the batch's Commit, so memory does
not grow with the size of a source transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pgshovel.abc import MicroBatch
from pgshovel.errors import ProgrammingError
from pgshovel.settings import NonEmptyText, PositiveInt, PositiveSeconds
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.reader import KafkaReader
from pgshovel.stream.state import WorkerState
from pgshovel.stream.validation import StreamValidator

logger = logging.getLogger(__name__)


class KafkaStream:
    """Reads the set's topic (``<cluster>.<set>`` unless ``topic`` is given)."""

    def __init__(
        self,
        bootstrap_servers: NonEmptyText,
        topic: NonEmptyText | None = None,
        properties: Mapping[str, Any] | None = None,
        max_batch_messages: PositiveInt = 50000,
        poll_timeout: PositiveSeconds = 1.0,
        part_mutations: PositiveInt = 20000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.properties = dict(properties or {})
        self.max_batch_messages = max_batch_messages
        self.poll_timeout = float(poll_timeout)
        self.part_mutations = part_mutations
        self._reader: KafkaReader | None = None

    @property
    def reader(self) -> KafkaReader:
        if self._reader is None:
            raise ProgrammingError("kafka stream is not open; call open() first")
        return self._reader

    def open(self, default_topic: str) -> None:
        self.topic = self.topic or default_topic
        self._reader = KafkaReader(self.bootstrap_servers, self.topic, self.properties)

    def start_position(self) -> StreamPosition:
        return StreamPosition.start(self.reader.end_offsets())

    def micro_batches(
        self, state: WorkerState, should_stop: Callable[[], bool]
    ) -> Iterator[MicroBatch]:
        reader = self.reader
        reader.resume(state.position)
        validator = StreamValidator(state.position)
        logger.info("streaming topic %r from %s", reader.topic, state.position.describe())
        while not should_stop():
            messages = reader.read(self.max_batch_messages, self.poll_timeout)
            batches: list[CommittedBatch] = list(validator.validate(messages))
            # Only the batch open when the read began can have parts out, so its end
            # came before every batch this read committed.
            abandon = validator.take_abandoned()
            part = validator.take_part(self.part_mutations)
            if not batches and part is None:
                # Nothing to apply: hand control back anyway (the worker has other duties).
                yield MicroBatch(batches=(), messages=len(messages), lag=0, abandon=abandon)
                continue
            last = messages[-1][0]
            # Lag is for reporting only: the end offset the last fetch brought is enough.
            lag = max(0, (reader.cached_end() or last + 1) - last - 1)
            if batches:
                yield MicroBatch(
                    batches=tuple(batches), messages=len(messages), lag=lag, abandon=abandon
                )
                abandon = False
            if part is not None:
                yield MicroBatch(batches=(part,), messages=0, lag=lag, abandon=abandon)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
