"""The driver's side of the source: where a query starts, and the last complete batch now.

``StreamPlanner`` opens a ``KafkaReader`` on the set topic (refusing a topic
with more than one partition, as every reader of a set does today), turns
``earliest``/``latest`` into a start position (nothing consumed yet: the
validator synchronizes on the first Begin), and answers ``latest(start,
max_mutations)``: it reads from ``start`` up to the topic's end offset as it is
now and returns the offset right after the last batch that committed
(``Frontier``). The frontier is kept between calls, so when Spark asks again
from the offset last returned, reading continues where it stopped instead of
reading the open batch's messages again.
"""

from __future__ import annotations

import logging
from typing import Any

from pgshovel.errors import StreamError
from pgshovel.spark_source.frontier import Frontier
from pgshovel.spark_source.offsets import offset_document, position_of
from pgshovel.spark_source.options import SourceOptions
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.reader import KafkaReader, partition_mismatch

__all__ = ["StreamPlanner"]

logger = logging.getLogger(__name__)

#: messages per read from Kafka
_CHUNK = 5000
#: how long a read waits for its first message when the end offset says more exist
_WAIT = 5.0


class StreamPlanner:
    """The driver's reader of the set topic (see the module documentation)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._reader: KafkaReader | None = None
        self._frontier: Frontier | None = None
        #: where the frontier's reader stands (the next offset it reads)
        self._reader_offset = -1

    def _kafka(self) -> KafkaReader:
        if self._reader is None:
            self._reader = KafkaReader(
                self.options.bootstrap_servers,
                self.options.topic,
                self.options.kafka_properties(),
            )
            count = self._reader.partitions()
            if count == 0:
                raise StreamError(
                    f"topic {self.options.topic!r} does not exist on "
                    f"{self.options.bootstrap_servers!r}: check option 'topic' (the relay "
                    "creates it when it publishes its first batch)"
                )
            if count > 1:
                raise StreamError(partition_mismatch(self.options.topic, count))
        return self._reader

    def start_position(self, choice: str | dict[str, Any]) -> StreamPosition:
        """The position ``earliest``, ``latest`` or an offset document names."""
        if isinstance(choice, dict):
            return position_of(choice, self.options.topic)
        low, high = self._kafka().watermarks(0)
        return StreamPosition.start((low if choice == "earliest" else high,))

    def start_offset(self, choice: str | dict[str, Any]) -> dict[str, Any]:
        return offset_document(self.options.topic, self.start_position(choice))

    def latest(self, start: StreamPosition, max_mutations: int | None = None) -> StreamPosition:
        """The position after the last batch committed between ``start`` and the topic's end
        now (at the first batch end past ``max_mutations``); ``start`` if none did."""
        reader = self._kafka()
        frontier = self._frontier
        if frontier is None or frontier.boundary != start:
            frontier = self._frontier = Frontier(start)
            self._reader_offset = -1
        budget = max_mutations
        boundary, used = frontier.cut(budget)
        if budget is not None and used >= budget and boundary != start:
            return boundary
        _low, high = reader.watermarks(0)
        while frontier.next_offset < high:
            if self._reader_offset != frontier.next_offset:
                reader.seek(frontier.next_offset, 0)
                self._reader_offset = frontier.next_offset
            messages = reader.read(min(_CHUNK, high - frontier.next_offset), _WAIT)
            if not messages:
                logger.warning(
                    "no message of topic %r at offset %d within %.0f s although its end offset "
                    "is %d; planning with what was read",
                    self.options.topic,
                    frontier.next_offset,
                    _WAIT,
                    high,
                )
                break
            frontier.add(messages)
            self._reader_offset = frontier.next_offset
            boundary, more = frontier.cut(None if budget is None else budget - used)
            used += more
            if budget is not None and used >= budget and boundary != start:
                break
        return frontier.boundary

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._frontier = None
