"""The cross-partition join: a set topic's partitions validated one by one, batches emitted whole.

A partitioned set topic (``partitions: N`` in relay.yml) frames every PgQ batch
in every partition: the same batch id, ``Begin.partition``/``Begin.partitions``,
and a Commit carrying the partition's mutation count and the batch's total.
``PartitionJoin`` validates each partition with its own ``StreamValidator``
(sequences, publisher epochs, framing, re-sent batches) and holds what each one
commits until every partition has committed the same (node, batch id); the
partitions' counts must then add up to the batch total. The joined
``CommittedBatch`` holds the row changes of all partitions in event id order
(``JoinedMutations``: a key change written to the partitions of both its old and
new key is the same row change, kept once, so the driver sees exactly the
one-partition stream), the markers at their place in that order, and a
``StreamPosition`` with every partition's cursor after its Commit. Begins that
disagree with the topic's partition count stop the join. With one partition the
join is the validator itself (parts of huge batches included). A join started
from a loader's start position (no partition consumed yet) drops a batch that a
partition shows only in part or not at all: it was written before the start
offsets were read, so the snapshot holds it. After a ``StreamError`` the join is
broken: stop.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch, Marker, RowMutations
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.validation import StreamValidator, ValidatorStatistics

__all__ = ["JoinedMutations", "PartitionJoin", "event_ids"]

logger = logging.getLogger(__name__)


def event_ids(mutations: Sequence[stream_pb2.Mutation]) -> list[int]:
    """The event ids of a batch's mutations, in order, without decoding ROWS values."""
    if isinstance(mutations, RowMutations):
        return [change.id for message in mutations.messages for change in message.rows.changes]
    return [mutation.id for mutation in mutations]


class JoinedMutations(Sequence[stream_pb2.Mutation]):
    """A joined batch's mutations: the partitions' in event id order, each row change once.

    ``parts`` are the partitions' own sequences (a stager reads their ROWS messages);
    the merged mutations are built on first use.
    """

    __slots__ = ("_count", "_merged", "ids", "parts")

    def __init__(
        self,
        parts: tuple[Sequence[stream_pb2.Mutation], ...],
        ids: tuple[list[int], ...],
        count: int,
    ) -> None:
        self.parts = parts
        self.ids = ids
        self._count = count
        self._merged: tuple[stream_pb2.Mutation, ...] | None = None

    def _all(self) -> tuple[stream_pb2.Mutation, ...]:
        if self._merged is None:
            streams = [
                zip(ids, part, strict=True) for ids, part in zip(self.ids, self.parts, strict=True)
            ]
            merged: list[stream_pb2.Mutation] = []
            last = None
            for event_id, mutation in heapq.merge(*streams, key=lambda item: item[0]):
                if event_id != last:
                    merged.append(mutation)
                    last = event_id
            self._merged = tuple(merged)
        return self._merged

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
        if isinstance(other, Sequence):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"JoinedMutations({self._count} row change(s) of {len(self.parts)} partition(s))"


class PartitionJoin:
    """Validates every partition of a set topic and emits whole batches (module docs)."""

    def __init__(self, position: StreamPosition | None = None) -> None:
        if position is None:
            position = StreamPosition.start((0,))
        self.partitions = len(position.partitions)
        self._committed: dict[bytes, int] = dict(position.committed)
        if self.partitions == 1:
            self._validators = [StreamValidator(position)]
        else:
            self._validators = [
                StreamValidator(StreamPosition((cursor,), position.committed))
                for cursor in position.partitions
            ]
        self._pending: list[deque[CommittedBatch]] = [deque() for _ in range(self.partitions)]
        #: before the first joined batch, partitions that started without a consumed message
        self._starting = [not cursor.consumed for cursor in position.partitions]
        self.joined = 0
        self.dropped = 0

    @property
    def validators(self) -> tuple[StreamValidator, ...]:
        return tuple(self._validators)

    @property
    def statistics(self) -> ValidatorStatistics:
        """The validators' statistics summed over the partitions."""
        total = ValidatorStatistics()
        for validator in self._validators:
            for field in dataclasses.fields(ValidatorStatistics):
                name = field.name
                setattr(total, name, getattr(total, name) + getattr(validator.statistics, name))
        return total

    def validate(
        self, records: Iterable[tuple[int, int, stream_pb2.Message]]
    ) -> Iterator[CommittedBatch]:
        """Feed ``(partition, offset, message)`` triples (each partition in offset order);
        yield each batch once every partition committed it."""
        feed = self.feed
        for partition, offset, message in records:
            batch = feed(partition, offset, message)
            if batch is not None:
                yield batch

    def feed(
        self, partition: int, offset: int, message: stream_pb2.Message
    ) -> CommittedBatch | None:
        """Validate one message of ``partition``; return the batch it completes, if any."""
        if not 0 <= partition < self.partitions:
            raise StreamError(
                f"message at offset {offset!r} of partition {partition!r}, the stream has "
                f"{self.partitions!r} partition(s); reload the target from a fresh snapshot"
            )
        validator = self._validators[partition]
        if self.partitions == 1:
            batch = validator.feed(offset, message)
            if batch is not None:
                self._check_begin(batch, 0)
                self._committed[batch.node] = batch.batch_id
                self.joined += 1
            return batch
        try:
            batch = validator.feed(offset, message)
        except StreamError as error:
            raise StreamError(f"partition {partition!r}: {error}") from error
        if batch is None:
            return None
        self._check_begin(batch, partition)
        self._pending[partition].append(batch)
        return self._join()

    def take_part(self, at_least: int) -> CommittedBatch | None:
        """A one-partition stream's open batch in part (``StreamValidator.take_part``); a
        partitioned stream holds batches whole (never a part)."""
        if self.partitions != 1:
            return None
        return self._validators[0].take_part(at_least)

    def take_abandoned(self) -> bool:
        """``StreamValidator.take_abandoned`` of a one-partition stream."""
        return self.partitions == 1 and self._validators[0].take_abandoned()

    def held(self) -> int:
        """Row changes committed in some partitions and waiting for the others."""
        return sum(len(batch.mutations) for pending in self._pending for batch in pending)

    # Joining.

    def _check_begin(self, batch: CommittedBatch, partition: int) -> None:
        begin = batch.begin
        framed = begin.partitions or 1
        if framed != self.partitions or begin.partition != partition:
            raise StreamError(
                f"batch {batch.batch_id!r} was framed as partition {begin.partition!r} of "
                f"{framed!r} and read from partition {partition!r} of a topic with "
                f"{self.partitions!r}: the topic's partition count does not match the relay's "
                f"`partitions` setting; set `partitions: {self.partitions!r}` in relay.yml (or "
                "recreate the topic with the relay's count), restart the relay and reload the "
                "target from a fresh snapshot"
            )

    def _join(self) -> CommittedBatch | None:
        pending = self._pending
        while all(pending):
            heads = [queue[0] for queue in pending]
            identities = {(head.node, head.batch_id) for head in heads}
            if len(identities) == 1:
                for queue in pending:
                    queue.popleft()
                self._starting = [False] * self.partitions
                return self._merge(heads)
            if not self._drop_unseen(heads):
                described = ", ".join(
                    f"partition {number}: batch {head.batch_id!r}"
                    for number, head in enumerate(heads)
                )
                raise StreamError(
                    f"the partitions committed different batches next ({described}): a "
                    "partition lost a batch's commit; reload the target from a fresh snapshot"
                )
        return None

    def _drop_unseen(self, heads: list[CommittedBatch]) -> bool:
        """Before the first joined batch: drop heads older than the first batch of a partition
        that started mid-topic (the snapshot holds them). True if something was dropped."""
        newest = max(
            (
                head.batch_id
                for number, head in enumerate(heads)
                if self._starting[number] and head.node == heads[0].node
            ),
            default=None,
        )
        if newest is None or any(head.node != heads[0].node for head in heads):
            return False
        dropped = False
        for queue in self._pending:
            while queue and queue[0].batch_id < newest:
                logger.info(
                    "skipping batch %d: written before the start position of another partition",
                    queue.popleft().batch_id,
                )
                self.dropped += 1
                dropped = True
        return dropped

    def _merge(self, parts: list[CommittedBatch]) -> CommittedBatch:
        first = parts[0]
        counts = [len(part.mutations) for part in parts]
        totals = {part.commit.batch_mutations if part.commit else 0 for part in parts}
        if len(totals) != 1 or sum(counts) != next(iter(totals)):
            raise StreamError(
                f"batch {first.batch_id!r}: the partitions' commits count {counts!r} row "
                f"change(s) and a batch total of {sorted(totals)!r}; messages of the batch are "
                "missing from the topic; reload the target from a fresh snapshot"
            )
        ids = tuple(event_ids(part.mutations) for part in parts)
        distinct = len(set().union(*ids))
        self._committed[first.node] = first.batch_id
        cursors: list[PartitionCursor] = [part.position.partitions[0] for part in parts]
        self.joined += 1
        return CommittedBatch(
            node=first.node,
            batch_id=first.batch_id,
            begin=first.begin,
            mutations=JoinedMutations(tuple(part.mutations for part in parts), ids, distinct),
            position=StreamPosition(tuple(cursors), tuple(self._committed.items())),
            markers=self._markers(parts, ids),
            complete=True,
            commit=first.commit,
        )

    def _markers(
        self, parts: list[CommittedBatch], ids: tuple[list[int], ...]
    ) -> tuple[Marker, ...]:
        """The markers (written to every partition) at their place in the merged order: after
        every row change any partition holds before them."""
        if not any(part.markers for part in parts):
            return ()
        if len({len(part.markers) for part in parts}) != 1:
            raise StreamError(
                f"batch {parts[0].batch_id!r}: the partitions hold different numbers of schema "
                "changes and watermarks; reload the target from a fresh snapshot"
            )
        markers: list[Marker] = []
        for index, (_before, marker) in enumerate(parts[0].markers):
            seen: set[int] = set()
            for part, part_ids in zip(parts, ids, strict=True):
                seen.update(part_ids[: part.markers[index][0]])
            markers.append((len(seen), marker))
        return tuple(markers)
