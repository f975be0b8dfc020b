"""Framing a PgQ batch into the set topic's messages: the MUTATIONS and the ROWS encodings.

A framer turns a batch's events into messages and keeps the publisher
identity (uuid, epoch, sequence numbers) across batches. ``begin`` opens a
batch, ``add`` frames a chunk of events, ``commit`` closes it; ``take``
returns what was framed since the last ``take`` — the messages and the set
topic partition of each — for the relay to push; ``roll_back`` settles what
Kafka holds after a failure (see ``pgshovel.stream.publisher``): a Rollback
where the writer still works, else a new publisher identity.

``MutationFramer``: one message per event, in event order, on partition 0
(the second wave's stream). ``RowFramer``: row changes many to a
``MutationBatch`` message (``pgshovel.stream.rows``), every batch framed in
every partition of the set topic — Begin, rows, schema changes and
watermarks, Commit with the partition's and the batch's counts — with
sequence numbers per partition. Row messages are cut in *rounds*: whenever one
partition's message is full, or a schema change or watermark comes, every
partition's pending rows are framed, so a ``take`` holds, for each partition,
the rows of the same run of events (the table topics rely on this to see the
changes in event order).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby, islice
from typing import Any, cast

from pgshovel.abc import EventDecoder, EventRow
from pgshovel.protocol import stream_pb2
from pgshovel.relay.packed_run import PackedRun
from pgshovel.relay.packing import flattened
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.rows_builder import CHANGE_ALLOWANCE, EncodedChange, EncodedRun, RowsBuilder

__all__ = ["MutationFramer", "RowFramer"]

SCHEMA_EVENT, WATERMARK_EVENT = "S", "W"
#: MUTATIONS: messages framed before the relay pushes them (bounds memory; one fetch of
#: ``PgqQueue.fetch_size`` rows at a time)
PUSH_CHUNK = 5_000
ROWS = stream_pb2.Begin.ROWS
#: ROWS: the most events encoded as one run (a message holds thousands: a run that would
#: fill it is added change by change, so each message ends where it would one by one)
RUN_EVENTS = 200
#: what a run of events shares (type first): a packed row's run of changes
_run_key = operator.itemgetter(3, 1, 2, 5, 6, 7, 8)


class MutationFramer:
    """The MUTATIONS encoding: one message per event, partition 0."""

    def __init__(self, decoder: EventDecoder, epoch: int) -> None:
        self.decoder = decoder
        self.epoch = epoch
        self.publisher = Publisher(epoch=epoch)
        self._messages: list[stream_pb2.Message] = []
        self._batch = stream_pb2.BatchIdentifier()
        self._taken_any = False
        self._given_before = False
        self._frame: Any = None

    @property
    def ready(self) -> bool:
        return len(self._messages) >= PUSH_CHUNK

    def begin(
        self,
        batch: stream_pb2.BatchIdentifier,
        start: stream_pb2.Tick,
        end: stream_pb2.Tick,
        set_version: str,
    ) -> None:
        self._batch = batch
        self._taken_any = False
        self._frame = self.publisher.framer(batch)
        self._messages = [self.publisher.begin(batch, start, end, set_version)]

    def add(self, events: Sequence[EventRow | PackedRun]) -> None:
        events = flattened(events)
        encode_mutation = self.decoder.encode_mutation
        decode_into = self.decoder.decode_into
        stamp = self.publisher.stamp
        frame = self._frame
        new_message = stream_pb2.Message
        append = self._messages.append
        for row in events:
            message = new_message()
            mutation = encode_mutation(row)
            if mutation is None:
                decode_into(row, message)
                stamp(self._batch, message)
            else:
                message.MergeFromString(frame(mutation))
            append(message)

    def commit(self) -> None:
        self._messages.append(self.publisher.commit(self._batch))

    def take(self) -> tuple[list[stream_pb2.Message], list[int]]:
        messages, self._messages = self._messages, []
        self._given_before = self._taken_any
        self._taken_any = self._taken_any or bool(messages)
        return messages, [0] * len(messages)

    def restore(self, messages: list[stream_pb2.Message], partitions: list[int]) -> None:
        self._messages = messages + self._messages
        self._taken_any = self._given_before

    def roll_back(self, certain: bool) -> tuple[list[stream_pb2.Message], list[int]]:
        if not certain:
            self.publisher = Publisher(epoch=self.epoch)
            self._messages = []
            return [], []
        publisher = self.publisher
        unpushed = self._messages[0].header.sequence if self._messages else publisher.next_sequence
        self._messages = []
        publisher.rewind(unpushed)
        if not self._taken_any:
            return [], []
        return [publisher.rollback(self._batch)], [0]


class RowFramer:
    """The ROWS encoding over ``partitions`` partitions (see the module documentation)."""

    def __init__(
        self, decoder: EventDecoder, epoch: int, partitions: int, max_message_bytes: int
    ) -> None:
        self.decoder = decoder
        self.epoch = epoch
        self.partitions = partitions
        self.max_message_bytes = max_message_bytes
        self.encoder = decoder.row_encoder(partitions)
        self.publishers = self._identity()
        self._builders = [RowsBuilder() for _ in range(partitions)]
        self._counts = [0] * partitions
        self._messages: list[stream_pb2.Message] = []
        self._partitions: list[int] = []
        self._batch = stream_pb2.BatchIdentifier()
        self._taken = [False] * partitions
        self._given_before = [False] * partitions

    def _identity(self) -> list[Publisher]:
        first = Publisher(epoch=self.epoch)
        return [first] + [
            Publisher(epoch=self.epoch, publisher=first.id) for _ in range(self.partitions - 1)
        ]

    @property
    def ready(self) -> bool:
        return bool(self._messages)

    def _append(self, partition: int, message: stream_pb2.Message) -> None:
        self._messages.append(message)
        self._partitions.append(partition)

    def begin(
        self,
        batch: stream_pb2.BatchIdentifier,
        start: stream_pb2.Tick,
        end: stream_pb2.Tick,
        set_version: str,
    ) -> None:
        self._batch = batch
        self._counts = [0] * self.partitions
        self._taken = [False] * self.partitions
        self._builders = [RowsBuilder() for _ in range(self.partitions)]
        for partition, publisher in enumerate(self.publishers):
            message = publisher.begin(batch, start, end, set_version)
            opened = message.operation.begin
            opened.encoding = ROWS
            opened.partition = partition
            opened.partitions = self.partitions
            self._append(partition, message)

    def add(self, events: Sequence[EventRow | PackedRun]) -> None:
        start = 0
        for index in [i for i, kind in enumerate(map(type, events)) if kind is PackedRun]:
            if index > start:
                self._add_rows(events[start:index])
            self._add_packed(cast(PackedRun, events[index]))
            start = index + 1
        if start < len(events):
            self._add_rows(events[start:] if start else events)

    def _add_packed(self, run: PackedRun) -> None:
        """A run of COPY lines: forwarded as they are where the encoder vouches for them,
        else as its events."""
        if self.partitions != 1:
            routed = self.encoder.encode_packed_routes(run)
            if routed is None:
                self._add_each(run.events())
                return
            whole, routes = routed
            for start in range(0, len(routes), RUN_EVENTS):
                end = start + RUN_EVENTS
                if not self._add_shares(whole, routes, start, end):
                    for change, route in zip(
                        islice(whole.changes(), start, end), routes[start:end], strict=False
                    ):
                        self._add_change(replace(change, partitions=route))
            return
        builder = self._builders[0]
        pieces = [run]
        while pieces[-1].size > RUN_EVENTS:
            pieces[-1:] = pieces[-1].split(RUN_EVENTS)
        for piece in pieces:
            encoded = self.encoder.encode_packed(piece)
            if encoded is None:
                self._add_rows(piece.events())
            elif builder.add_run(encoded, self.max_message_bytes):
                self._counts[0] += piece.size
            else:  # the run would end the message: its changes one by one, as they fit
                for change in encoded.changes():
                    self._add_change(change)

    def _add_shares(
        self, run: EncodedRun, routes: list[tuple[int, ...]], start: int, end: int
    ) -> bool:
        """The changes ``start`` to ``end`` of ``run`` (going to the partitions of
        ``routes``) added as one run per partition, when every partition's share fits below
        the limit with room to spare, so that adding them one by one would cut no message:
        the same bytes. Else nothing is added and False returned."""
        shares: dict[int, list[int]] = {}
        for index in range(start, min(end, len(routes))):
            for partition in routes[index]:
                shares.setdefault(partition, []).append(index)
        sizes = [0] * len(routes)
        for lines in (run.olds, run.news):
            if lines is not None:
                for index in range(start, min(end, len(routes))):
                    sizes[index] += len(lines[index])
        spare = len(run.table) + 4 + 2 * CHANGE_ALLOWANCE
        for partition, share in shares.items():
            rows = [sizes[index] for index in share]
            bound = sum(rows) + CHANGE_ALLOWANCE * len(share) + max(rows) + spare
            if self._builders[partition].size + bound > self.max_message_bytes:
                return False
        for partition, share in shares.items():
            pick = operator.itemgetter(*share) if len(share) > 1 else None

            def part(items: list[Any], pick: Any = pick, share: list[int] = share) -> list[Any]:
                return list(pick(items)) if pick is not None else [items[share[0]]]

            piece = EncodedRun(
                run.table,
                run.operation,
                run.transaction,
                run.timestamp,
                part(run.ids),
                None if run.olds is None else part(run.olds),
                None if run.news is None else part(run.news),
                None,
            )
            if not self._builders[partition].add_run(piece, self.max_message_bytes):
                raise RuntimeError(
                    f"a share of {len(share)} row changes did not fit partition {partition}'s "
                    "message within the bound it was checked against: report this as a bug"
                )
            self._counts[partition] += len(share)
        return True

    def _add_rows(self, events: Sequence[EventRow]) -> None:
        """Events (no ``PackedRun``): on one partition, runs of them encoded at once."""
        if self.partitions != 1:
            self._add_each(events)
            return
        encode_run = self.encoder.encode_run
        builder = self._builders[0]
        for key, group in groupby(events, _run_key):
            if key[0] == SCHEMA_EVENT or key[0] == WATERMARK_EVENT:
                self._add_each(list(group))
                continue
            events_of_run = list(group)
            for start in range(0, len(events_of_run), RUN_EVENTS):
                run = events_of_run[start : start + RUN_EVENTS]
                encoded = encode_run(run) if len(run) > 1 else None
                if encoded is None:
                    self._add_each(run)
                elif builder.add_run(encoded, self.max_message_bytes):
                    self._counts[0] += len(run)
                else:  # the run would end the message: its changes one by one, as they fit
                    for change in encoded.changes():
                        self._add_change(change)

    def _add_each(self, events: Sequence[EventRow]) -> None:
        """Frame ``events`` one by one."""
        encode = self.encoder.encode
        for row in events:
            kind = row[3]
            if kind == SCHEMA_EVENT or kind == WATERMARK_EVENT:
                self._round()
                marker = stream_pb2.Message()
                self.decoder.decode_into(row, marker)
                for partition, publisher in enumerate(self.publishers):
                    message = stream_pb2.Message()
                    message.CopyFrom(marker)
                    self._append(partition, publisher.stamp(self._batch, message))
                continue
            self._add_change(encode(row))

    def _add_change(self, change: EncodedChange) -> None:
        builders = self._builders
        limit = self.max_message_bytes
        size = len(change.old or b"") + len(change.new or b"") + CHANGE_ALLOWANCE
        if any(
            builders[partition].count and builders[partition].size + size > limit
            for partition in change.partitions
        ):
            # A message holds what fits; a row larger than the limit travels alone.
            self._round()
        full = False
        for partition in change.partitions:
            builder = builders[partition]
            builder.add_change(change)
            self._counts[partition] += 1
            full = full or builder.size >= limit
        if full:
            self._round()

    def _round(self) -> None:
        """Frame every partition's pending rows (a round: the same run of events in each)."""
        for partition, builder in enumerate(self._builders):
            payload = builder.take()
            if payload is None:
                continue
            message = stream_pb2.Message()
            message.operation.rows.MergeFromString(payload)
            self._append(partition, self.publishers[partition].stamp(self._batch, message))

    def commit(self) -> None:
        self._round()
        total = sum(self._counts)
        for partition, publisher in enumerate(self.publishers):
            message = publisher.commit(self._batch)
            message.operation.commit.mutations = self._counts[partition]
            message.operation.commit.batch_mutations = total
            self._append(partition, message)

    def take(self) -> tuple[list[stream_pb2.Message], list[int]]:
        messages, partitions = self._messages, self._partitions
        self._messages, self._partitions = [], []
        self._given_before = list(self._taken)
        for partition in partitions:
            self._taken[partition] = True
        return messages, partitions

    def restore(self, messages: list[stream_pb2.Message], partitions: list[int]) -> None:
        self._messages = messages + self._messages
        self._partitions = partitions + self._partitions
        self._taken = self._given_before

    def roll_back(self, certain: bool) -> tuple[list[stream_pb2.Message], list[int]]:
        if not certain:
            self.publishers = self._identity()
            self._messages, self._partitions = [], []
            return [], []
        rollbacks: list[stream_pb2.Message] = []
        where: list[int] = []
        for partition, publisher in enumerate(self.publishers):
            unpushed = next(
                (
                    message.header.sequence
                    for message, target in zip(self._messages, self._partitions, strict=True)
                    if target == partition
                ),
                publisher.next_sequence,
            )
            publisher.rewind(unpushed)
            if self._taken[partition]:
                rollbacks.append(publisher.rollback(self._batch))
                where.append(partition)
        self._messages, self._partitions = [], []
        return rollbacks, where
