"""What a validated stream yields: whole committed batches and the position after them.

A ``StreamPosition`` is everything a consumer must store, together with what it
applied, to resume exactly after the last batch it applied and to keep
validating the stream from there (same publisher: next sequence; a newer
publisher: its epoch must not be older).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgshovel.protocol import stream_pb2


@dataclass(frozen=True)
class StreamPosition:
    """The last message consumed: its Kafka offset and its header."""

    offset: int
    publisher: bytes
    sequence: int
    epoch: int
    # The last committed batch id per source node (16-byte uuid): re-sent batches
    # with an id at or below it are recognised and skipped.
    committed: tuple[tuple[bytes, int], ...] = field(default=())

    def last_batch(self, node: bytes) -> int | None:
        for known, batch_id in self.committed:
            if known == node:
                return batch_id
        return None


Marker = tuple[int, "stream_pb2.SchemaChange | stream_pb2.Watermark"]
"""A schema change or watermark of a batch, and how many of the batch's mutations precede it."""


@dataclass(frozen=True)
class CommittedBatch:
    """One PgQ batch that reached Commit: its Begin, its mutations and markers in order.

    A batch larger than a reader holds at once comes in parts (see
    ``StreamValidator.take_part``): every part but the last has ``complete``
    False, is the next run of the batch's mutations and markers, and its
    ``position`` is that of its last message — what a consumer must never
    store, since the batch may still roll back. The last part (``complete``)
    carries the batch's remaining mutations and the position of its Commit.
    """

    node: bytes
    batch_id: int
    begin: stream_pb2.Begin
    mutations: tuple[stream_pb2.Mutation, ...]
    # Position of the batch's Commit message; store it with the applied data.
    position: StreamPosition
    #: schema changes and watermarks, each after the first ``n`` mutations (``(n, operation)``)
    markers: tuple[Marker, ...] = ()
    #: False for a part of a batch whose Commit is still to come
    complete: bool = True
