"""What a validated stream yields: whole committed batches, each with the position after it.

The position (``pgshovel.stream.position.StreamPosition``) is everything a
consumer must store, together with what it applied, to resume exactly after the
last batch it applied and to keep validating the stream from there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from pgshovel.protocol import stream_pb2
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.rows import to_mutations


@dataclass(frozen=True)
class RowsMessage:
    """A ROWS message of a batch as read: where, the header it carried, its row changes."""

    offset: int
    publisher: bytes
    sequence: int
    rows: stream_pb2.MutationBatch


class RowMutations(Sequence[stream_pb2.Mutation]):
    """A batch's row changes as ``Mutation``s, decoded on first use (``to_mutations``).

    Its length is known without decoding, and ``messages`` are the ROWS messages
    themselves: a consumer that stages rows as they are (the worker's executors)
    never pays for typed values; any other reader sees the mutations.
    """

    __slots__ = ("_count", "_decoded", "messages")

    def __init__(self, messages: tuple[RowsMessage, ...], count: int) -> None:
        self.messages = messages
        self._count = count
        self._decoded: tuple[stream_pb2.Mutation, ...] | None = None

    def _all(self) -> tuple[stream_pb2.Mutation, ...]:
        if self._decoded is None:
            self._decoded = tuple(
                mutation for message in self.messages for mutation in to_mutations(message.rows)
            )
        return self._decoded

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> stream_pb2.Mutation: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[stream_pb2.Mutation]: ...

    def __getitem__(self, index: int | slice) -> Any:
        return self._all()[index]

    def __iter__(self) -> Iterator[stream_pb2.Mutation]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, RowMutations)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"RowMutations({self._count} row change(s) in {len(self.messages)} message(s))"


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
    #: a tuple, or ``RowMutations`` for a batch the ROWS encoding carried
    mutations: Sequence[stream_pb2.Mutation]
    #: the position after the batch's Commit message; store it with the applied data
    position: StreamPosition
    #: schema changes and watermarks, each after the first ``n`` mutations (``(n, operation)``)
    markers: tuple[Marker, ...] = ()
    #: False for a part of a batch whose Commit is still to come
    complete: bool = True
    #: the batch's Commit (its counts); None for a part
    commit: stream_pb2.Commit | None = None

    @property
    def offset(self) -> int:
        """The batch's place as one number, for the change log and ``set tail``: the messages
        before its position, less one (with the set topic's one partition, the Kafka offset
        of its Commit, or of a part's last message)."""
        return self.position.messages - 1
