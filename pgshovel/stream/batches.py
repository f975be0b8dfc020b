"""Committed batches, stream positions, and the state a consumer stores to resume exactly.

A ``StreamPosition`` is everything a consumer must store, together with what it
applied, to resume exactly after the last batch it applied and to keep
validating the stream from there (same publisher: next sequence; a newer
publisher: its epoch must not be older).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
    """One PgQ batch that reached Commit: its Begin, its mutations and markers in order."""

    node: bytes
    batch_id: int
    begin: stream_pb2.Begin
    mutations: tuple[stream_pb2.Mutation, ...]
    # Position of the batch's Commit message; store it with the applied data.
    position: StreamPosition
    #: schema changes and watermarks, each after the first ``n`` mutations (``(n, operation)``)
    markers: tuple[Marker, ...] = ()


Phase = Literal["snapshot", "streaming"]


@dataclass(frozen=True)
class WorkerState:
    """What a consumer stores with the applied data to resume exactly.

    ``snapshot`` is the loader's ``txid_current_snapshot()`` text, ``start_offset``
    the topic offset noted before it was exported, ``position`` the last applied
    batch (None until the first one).
    """

    phase: Phase
    snapshot: str
    start_offset: int
    position: StreamPosition | None = None

    @property
    def next_offset(self) -> int:
        return self.start_offset if self.position is None else self.position.offset + 1
