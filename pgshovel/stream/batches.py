"""What a validated stream yields: whole committed batches, each with the position after it.

The position (``pgshovel.stream.position.StreamPosition``) is everything a
consumer must store, together with what it applied, to resume exactly after the
last batch it applied and to keep validating the stream from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from pgshovel.protocol import stream_pb2
from pgshovel.stream.position import StreamPosition

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
    #: the position after the batch's Commit message; store it with the applied data
    position: StreamPosition
    #: schema changes and watermarks, each after the first ``n`` mutations (``(n, operation)``)
    markers: tuple[Marker, ...] = ()
    #: False for a part of a batch whose Commit is still to come
    complete: bool = True

    @property
    def offset(self) -> int:
        """The batch's place as one number, for the change log and ``set tail``: the messages
        before its position, less one (with the set topic's one partition, the Kafka offset
        of its Commit, or of a part's last message)."""
        return self.position.messages - 1
