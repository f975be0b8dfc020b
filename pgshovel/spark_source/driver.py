"""The driver's side of the source: where a query starts, and the last complete batch now.

``StreamPlanner`` opens a ``PartitionsReader`` on the set topic, turns
``earliest``/``latest`` into a start position over every partition (nothing
consumed yet: each partition's validator synchronizes on its first Begin), and
answers ``latest(start, max_mutations)``: it reads every partition from
``start`` up to its end offset as it is now and returns the offset right after
the last batch that completed in all of them (``Frontier``). The frontier is
kept between calls, so when Spark asks again from the offset last returned,
reading continues where it stopped instead of reading the open batch again.
"""

from __future__ import annotations

import logging
from typing import Any

from pgshovel.errors import StreamError
from pgshovel.spark_source.frontier import Frontier
from pgshovel.spark_source.kafka import PartitionsReader
from pgshovel.spark_source.offsets import offset_document, position_of
from pgshovel.spark_source.options import SourceOptions
from pgshovel.stream.position import StreamPosition

__all__ = ["StreamPlanner"]

logger = logging.getLogger(__name__)

#: messages per read from Kafka
_CHUNK = 5000
#: how long a read waits for its first message when the end offsets say more exist
_WAIT = 5.0


class StreamPlanner:
    """The driver's reader of the set topic (see the module documentation)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._reader: PartitionsReader | None = None
        self._partitions = 0
        self._frontier: Frontier | None = None
        #: where the reader is assigned to read next, per partition (None: not assigned)
        self._assigned: list[int] | None = None

    def _kafka(self) -> PartitionsReader:
        if self._reader is None:
            self._reader = PartitionsReader(
                self.options.bootstrap_servers,
                self.options.topic,
                self.options.kafka_properties(),
            )
            self._partitions = self._reader.partitions()
            if self._partitions == 0:
                raise StreamError(
                    f"topic {self.options.topic!r} does not exist on "
                    f"{self.options.bootstrap_servers!r}: check option 'topic' (the relay "
                    "creates it when it publishes its first batch)"
                )
        return self._reader

    def start_position(self, choice: str | dict[str, Any]) -> StreamPosition:
        """The position ``earliest``, ``latest`` or an offset document names."""
        reader = self._kafka()
        if isinstance(choice, dict):
            position = position_of(choice, self.options.topic)
            self._check_count(position)
            return position
        edges = [reader.watermarks(number) for number in range(self._partitions)]
        return StreamPosition.start([low if choice == "earliest" else high for low, high in edges])

    def start_offset(self, choice: str | dict[str, Any]) -> dict[str, Any]:
        return offset_document(self.options.topic, self.start_position(choice))

    def _check_count(self, position: StreamPosition) -> None:
        if len(position.partitions) != self._partitions:
            raise StreamError(
                f"the offset names {len(position.partitions)!r} partition(s) of topic "
                f"{self.options.topic!r}, which has {self._partitions!r}: the topic was "
                "recreated; restart the query with a new checkpoint location"
            )

    def latest(self, start: StreamPosition, max_mutations: int | None = None) -> StreamPosition:
        """The position after the last batch completed between ``start`` and the topic's end
        now (at the first batch end past ``max_mutations``); ``start`` if none did."""
        reader = self._kafka()
        self._check_count(start)
        frontier = self._frontier
        if frontier is None or frontier.boundary != start:
            frontier = self._frontier = Frontier(start)
            self._assigned = None
        budget = max_mutations
        boundary, used = frontier.cut(budget)
        if budget is not None and used >= budget and boundary != start:
            return boundary
        highs = [reader.watermarks(number)[1] for number in range(self._partitions)]
        while any(at < high for at, high in zip(frontier.next_offsets, highs, strict=True)):
            if self._assigned != frontier.next_offsets:
                reader.assign(dict(enumerate(frontier.next_offsets)))
            records = reader.read_records(_CHUNK, _WAIT)
            if not records:
                logger.warning(
                    "no message of topic %r within %.0f s although its end offsets are %r and "
                    "%r was read; planning with what was read",
                    self.options.topic,
                    _WAIT,
                    highs,
                    frontier.next_offsets,
                )
                break
            frontier.add(records)
            self._assigned = list(frontier.next_offsets)
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
