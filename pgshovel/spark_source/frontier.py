"""The driver's view of the stream: validate from an offset and cut at the last complete batch.

``Frontier`` holds a ``PartitionJoin`` (one ``StreamValidator`` per partition of
the set topic, a batch complete once every partition committed it and the
counts add up) started at a micro-batch's start position, and the messages read
but not yet fed. ``cut`` feeds them in order and returns the position right
after the last batch that completed (optionally stopping once a number of
mutations is reached), or the start position when none did. Rolled-back
batches, re-sent batches and a fenced publisher's messages are consumed as the
worker consumes them, so offsets only ever stand on a Commit of every
partition. The driver never needs a one-partition batch's rows: it hands what
the validator holds over as parts and drops them, so a huge batch costs it no
memory. Pure: the caller feeds the messages it read.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable

from pgshovel.protocol import stream_pb2
from pgshovel.stream.partitions import PartitionJoin
from pgshovel.stream.position import StreamPosition

__all__ = ["Frontier"]

logger = logging.getLogger(__name__)

#: mutations an open batch may hold on the driver before they are dropped (as a part)
_DROP_AT = 10_000


class Frontier:
    """Where a stream's batches end, from ``start`` on (see the module documentation)."""

    def __init__(self, start: StreamPosition) -> None:
        self._join = PartitionJoin(start)
        self._pending: deque[tuple[int, int, stream_pb2.Message]] = deque()
        #: the position after the last batch handed out by ``cut`` (or the start)
        self.boundary = start
        #: per partition, the next offset to read from Kafka
        self.next_offsets = [cursor.next_offset for cursor in start.partitions]

    def add(self, records: Iterable[tuple[int, int, stream_pb2.Message]]) -> None:
        """``(partition, offset, message)`` read after those added before, each partition in
        offset order."""
        for partition, offset, message in records:
            self._pending.append((partition, offset, message))
            self.next_offsets[partition] = offset + 1

    @property
    def pending(self) -> int:
        return len(self._pending)

    def cut(self, budget: int | None = None) -> tuple[StreamPosition, int]:
        """Feed what was added: the position after the last complete batch, and the mutations
        passed on the way; stops at the first batch end where ``budget`` mutations were
        passed (None: feeds all that was added)."""
        join = self._join
        mutations = 0
        while self._pending:
            partition, offset, message = self._pending.popleft()
            batch = join.feed(partition, offset, message)
            if batch is None:
                part = join.take_part(_DROP_AT)
                if part is not None:
                    mutations += len(part.mutations)
                join.take_abandoned()
                continue
            self.boundary = batch.position
            mutations += len(batch.mutations)
            if budget is not None and mutations >= budget:
                break
        return self.boundary, mutations
