"""The driver's view of the stream: validate from an offset and cut at the last complete batch.

``Frontier`` holds a ``StreamValidator`` started at a micro-batch's start
position and the messages read but not yet fed. ``cut`` feeds them in order and
returns the position right after the last batch that committed (optionally
stopping once a number of mutations is reached), or the start position when no
batch completed. Rolled-back batches, re-sent batches and a fenced publisher's
messages are consumed as the worker consumes them (``pgshovel.stream.validation``),
so the offsets only ever stand on a Commit. The driver never needs a batch's
rows: it hands what the validator holds over as parts and drops them, so a huge
batch costs it no memory. Pure: the caller feeds the messages it read.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable

from pgshovel.protocol import stream_pb2
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.validation import StreamValidator

__all__ = ["Frontier"]

logger = logging.getLogger(__name__)

#: mutations an open batch may hold on the driver before they are dropped (as a part)
_DROP_AT = 10_000


class Frontier:
    """Where a stream's batches end, from ``start`` on (see the module documentation)."""

    def __init__(self, start: StreamPosition) -> None:
        self._validator = StreamValidator(start)
        self._pending: deque[tuple[int, stream_pb2.Message]] = deque()
        #: the position after the last batch handed out by ``cut`` (or the start)
        self.boundary = start
        #: the next offset to read from Kafka (partition 0)
        self.next_offset = start.partitions[0].next_offset

    def add(self, messages: Iterable[tuple[int, stream_pb2.Message]]) -> None:
        """Messages read after the last ones added, in offset order."""
        for offset, message in messages:
            self._pending.append((offset, message))
            self.next_offset = offset + 1

    @property
    def pending(self) -> int:
        return len(self._pending)

    def cut(self, budget: int | None = None) -> tuple[StreamPosition, int]:
        """Feed what was added: the position after the last complete batch, and the mutations
        passed on the way; stops at the first batch end where ``budget`` mutations were
        passed (None: feeds all that was added)."""
        validator = self._validator
        mutations = 0
        while self._pending:
            offset, message = self._pending.popleft()
            batch = validator.feed(offset, message)
            if batch is None:
                part = validator.take_part(_DROP_AT)
                if part is not None:
                    mutations += len(part.mutations)
                validator.take_abandoned()
                continue
            self.boundary = batch.position
            mutations += len(batch.mutations)
            if budget is not None and mutations >= budget:
                break
        return self.boundary, mutations
