"""The validating reader: a table-driven state machine that turns messages into committed batches.

``StreamValidator.feed(offset, message)`` checks every message before anything is
applied and returns a ``CommittedBatch`` when a batch commits. Headers first: the
current publisher's messages must be numbered last + 1 (lower numbers are
producer-retry or re-read duplicates and are skipped; higher ones are a gap and
an error). Another publisher with an epoch below the highest seen, or one that
was already replaced, is a fenced zombie: skipped, never applied. Otherwise it
takes over, must start at sequence 0, and the previous publisher's open batch is
discarded. Then the transition table, keyed by (state, operation), checks the
framing Begin, Mutation*, Commit | Rollback (resolving each mutation's reference
to its transaction's provenance, ``pgshovel.stream.provenance``), and
recognises re-sent batches (a PgQ batch id at or below the last one committed
for its node) so that they are consumed but never emitted twice. A batch too
large to hold whole is handed over in parts (``take_part``) as it arrives; if
it then rolls back or its publisher is replaced, ``take_abandoned`` tells the
consumer to discard the parts it applied (it applies them uncommitted until the
last part). The validator starts from a ``StreamPosition`` and keeps the
header state of each partition; one whose position consumed nothing there yet
(a reader joining mid-topic: the loader's start position) trusts the first
publisher it sees and skips the tail of the batch in progress until the first
Begin: that tail's transactions were committed before the reader chose its
start offset, so the snapshot it loaded already holds them. For now messages
are fed from partition 0 (a set topic has one). After a ``StreamError`` the
validator is broken: stop.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch, Marker, RowMutations, RowsMessage
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.provenance import ProvenanceResolver

__all__ = ["State", "StreamValidator", "ValidatorStatistics"]

logger = logging.getLogger(__name__)


class State(enum.Enum):
    """Where the validator is between messages of the current publisher."""

    #: started without a position; skipping until the first Begin
    SYNCHRONIZING = "synchronizing"
    #: between batches
    IDLE = "idle"
    #: inside a batch that will be emitted at its Commit
    OPEN = "open"
    #: inside a re-sent batch that was already committed: consumed, not emitted
    SKIPPING = "skipping"


@dataclass(slots=True)
class ValidatorStatistics:
    """What the validator has seen so far (read-only for callers)."""

    messages: int = 0
    duplicates_skipped: int = 0
    fenced_skipped: int = 0
    #: messages before the first Begin of a validator started without a position
    partial_skipped: int = 0
    batches_committed: int = 0
    batches_rolled_back: int = 0
    #: open batches discarded because a new publisher took over
    batches_abandoned: int = 0
    resent_batches_skipped: int = 0
    #: parts of open batches handed over before their Commit (see ``take_part``)
    parts_taken: int = 0
    #: open batches with parts handed over that rolled back or were abandoned
    parts_abandoned: int = 0


def _uuid_text(value: bytes) -> str:
    return str(uuid.UUID(bytes=value)) if len(value) == 16 else repr(value)


_Handler = Callable[["StreamValidator", int, stream_pb2.Message], "CommittedBatch | None"]


@dataclass(slots=True)
class _Header:
    """One partition's header state: its current publisher (None before the first message of
    a validator started without one), that publisher's last sequence and its epoch, and the
    offset at or below which messages were consumed before the position was made."""

    publisher: bytes | None
    sequence: int
    epoch: int
    floor: int


class StreamValidator:
    """Validates a stream's messages in offset order, starting from ``position`` (None: from
    the start of a one-partition topic); see the module documentation.

    Header state is held per partition; batch framing is checked on the partition fed.
    """

    def __init__(self, position: StreamPosition | None = None) -> None:
        if position is None:
            position = StreamPosition.start((0,))
        self.statistics = ValidatorStatistics()
        self._committed: dict[bytes, int] = dict(position.committed)
        self._retired: set[bytes] = set()
        self._warned: set[bytes] = set()
        self._batch_id = 0
        self._batch_node = b""
        self._begin: stream_pb2.Begin | None = None
        self._mutations: list[stream_pb2.Mutation] = []
        #: row changes the open ROWS batch held so far (counted against its commit)
        self._rows = 0
        #: the open ROWS batch's messages held (since its last part) and their row changes
        self._row_messages: list[RowsMessage] = []
        self._held_rows = 0
        self._markers: list[Marker] = []
        self._provenance = ProvenanceResolver()
        #: offset of the last message of the open batch
        self._last_offset = -1
        #: parts of the open batch handed over; its end must be reported (take_abandoned)
        self._parts_out = False
        self._abandoned = False
        self._headers: dict[int, _Header] = {
            number: _Header(
                cursor.publisher or None,
                cursor.sequence if cursor.consumed else -1,
                cursor.epoch if cursor.consumed else 0,
                cursor.next_offset - 1,
            )
            for number, cursor in enumerate(position.partitions)
        }
        self._highest_epoch = max(header.epoch for header in self._headers.values())
        #: the partition messages are fed from (one for now)
        self._partition = 0
        self._header = self._headers[self._partition]
        self._state = State.IDLE if self._header.publisher is not None else State.SYNCHRONIZING

    @property
    def state(self) -> State:
        return self._state

    @property
    def publisher(self) -> bytes | None:
        """The current publisher's uuid, None before the first message."""
        return self._header.publisher

    def validate(
        self, messages: Iterable[tuple[int, stream_pb2.Message]]
    ) -> Iterator[CommittedBatch]:
        """Feed ``(offset, message)`` pairs in order; yield each batch as it commits."""
        feed = self.feed
        for offset, message in messages:
            batch = feed(offset, message)
            if batch is not None:
                yield batch

    def feed(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        """Validate one message; return the batch it commits, if it is a Commit to emit.

        The returned batch shares its Begin and Mutations with the fed messages
        (no copies): do not modify those messages afterwards. A mutation that refers
        to its transaction's provenance (``provenance_of``) gets it in full, in place
        (``pgshovel.stream.provenance``).
        """
        self.statistics.messages += 1
        current = self._header
        if offset <= current.floor:
            # At or before the resume position: already consumed.
            self.statistics.duplicates_skipped += 1
            return None
        if not message.HasField("header"):
            raise self._error("message has no header", offset, message)
        header = message.header
        if header.publisher == current.publisher:
            sequence = header.sequence
            if sequence <= current.sequence:
                self.statistics.duplicates_skipped += 1
                return None
            if sequence != current.sequence + 1:
                raise self._error(
                    f"sequence gap: expected sequence {current.sequence + 1!r} next, "
                    f"{sequence - current.sequence - 1!r} message(s) are missing; the topic lost "
                    "messages (retention, an unordered producer, a topic with more than one "
                    "partition); reload the target from a fresh snapshot",
                    offset,
                    message,
                )
            if header.epoch != current.epoch:
                raise self._error(
                    f"publisher changed its epoch from {current.epoch!r} to {header.epoch!r}; "
                    "a relay must start a new publisher for a new epoch",
                    offset,
                    message,
                )
            current.sequence = sequence
        elif not self._take_over(offset, message):
            return None
        kind = message.operation.WhichOneof("operation")
        handler = _TRANSITIONS.get((self._state, kind))
        if handler is None:
            raise self._error(
                f"message has no operation (operation {kind!r}); "
                "it was not written by a pgshovel relay",
                offset,
                message,
            )
        return handler(self, offset, message)

    def take_part(self, at_least: int) -> CommittedBatch | None:
        """The open batch's mutations and markers received so far, if at least ``at_least``
        mutations, as an incomplete part (``complete`` False); they are no longer held here.

        The consumer applies the part without committing it: the batch may still roll
        back, and then ``take_abandoned`` says so.
        """
        if self._state is not State.OPEN or self._held() < max(at_least, 1):
            return None
        begin = self._begin
        if begin is None:  # pragma: no cover - OPEN always has a Begin
            return None
        part = self._batch(begin, self._last_offset, complete=False)
        self._mutations = []
        self._row_messages = []
        self._held_rows = 0
        self._markers = []
        self._parts_out = True
        self.statistics.parts_taken += 1
        return part

    def take_abandoned(self) -> bool:
        """Whether a batch with parts handed over ended without Commit since the last call
        (rolled back, or abandoned by its publisher): discard what its parts did."""
        abandoned, self._abandoned = self._abandoned, False
        return abandoned

    # Publisher changes.

    def _take_over(self, offset: int, message: stream_pb2.Message) -> bool:
        """Admit a message of another publisher: True if it is now current, False if fenced."""
        header = message.header
        current = self._header
        publisher = header.publisher
        if len(publisher) != 16:
            raise self._error(
                f"publisher id must be a 16-byte uuid, got {len(publisher)!r} bytes",
                offset,
                message,
            )
        if header.epoch < self._highest_epoch or publisher in self._retired:
            self.statistics.fenced_skipped += 1
            if publisher not in self._warned:
                self._warned.add(publisher)
                logger.warning(
                    "skipping messages of fenced publisher %s (epoch %d, highest epoch %d, "
                    "current publisher %s) from offset %d: a relay that lost its leadership "
                    "is still writing",
                    _uuid_text(publisher),
                    header.epoch,
                    self._highest_epoch,
                    _uuid_text(current.publisher or b""),
                    offset,
                )
            return False
        if header.sequence != 0 and self._state is not State.SYNCHRONIZING:
            raise self._error(
                f"new publisher starts at sequence {header.sequence!r} instead of 0, taking "
                f"over from publisher {_uuid_text(current.publisher or b'')} "
                f"(epoch {current.epoch!r}); its first messages are missing from the topic",
                offset,
                message,
            )
        if current.publisher is not None:
            self._retired.add(current.publisher)
            logger.info(
                "publisher %s (epoch %d) took over from publisher %s (epoch %d) at offset %d",
                _uuid_text(publisher),
                header.epoch,
                _uuid_text(current.publisher),
                current.epoch,
                offset,
            )
        if self._state is State.OPEN or self._state is State.SKIPPING:
            # The old relay never finished this batch; the new one re-sends it.
            self.statistics.batches_abandoned += 1
            self._discard(committed=False)
        current.publisher = publisher
        current.sequence = header.sequence
        current.epoch = header.epoch
        self._highest_epoch = header.epoch
        return True

    # Transition handlers, one per (state, operation) in _TRANSITIONS.

    def _on_begin(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        operation = message.operation
        if not operation.HasField("batch") or len(operation.batch.node) != 16:
            raise self._error(
                "begin needs a batch identifier with a 16-byte node uuid", offset, message
            )
        batch = operation.batch
        self._batch_id = batch.id
        self._batch_node = batch.node
        last = self._committed.get(batch.node)
        if last is not None and batch.id <= last:
            self._state = State.SKIPPING
            return None
        self._begin = operation.begin
        self._mutations = []
        self._rows = 0
        self._row_messages = []
        self._held_rows = 0
        self._markers = []
        self._provenance.reset()
        self._last_offset = offset
        self._state = State.OPEN
        return None

    def _on_mutation(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        if self._begin is not None and self._begin.encoding == stream_pb2.Begin.ROWS:
            raise self._error(
                "a message per mutation in a batch whose begin announced row changes; it was "
                "not written by a pgshovel relay",
                offset,
                message,
            )
        mutation = message.operation.mutation
        problem = self._provenance.resolve(mutation)
        if problem:
            raise self._error(f"{problem}; it was not written by a pgshovel relay", offset, message)
        self._mutations.append(mutation)
        self._last_offset = offset
        return None

    def _on_rows(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        if self._begin is None or self._begin.encoding != stream_pb2.Begin.ROWS:
            raise self._error(
                "row changes in a batch whose begin announced one message per mutation; it "
                "was not written by a pgshovel relay",
                offset,
                message,
            )
        rows = message.operation.rows
        if rows.count != len(rows.changes):
            raise self._error(
                f"a rows message says it holds {rows.count!r} row change(s) and holds "
                f"{len(rows.changes)!r}; the message is damaged",
                offset,
                message,
            )
        header = message.header
        self._row_messages.append(RowsMessage(offset, header.publisher, header.sequence, rows))
        self._held_rows += rows.count
        self._rows += rows.count
        self._last_offset = offset
        return None

    def _on_marker(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        self._last_offset = offset
        operation = message.operation
        kind = operation.WhichOneof("operation")
        marker = operation.schema_change if kind == "schema_change" else operation.watermark
        self._markers.append((self._held(), marker))
        return None

    def _on_commit(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        begin = self._begin
        if begin is None:  # pragma: no cover - OPEN always has a Begin
            raise self._error("open batch lost its begin", offset, message)
        commit = message.operation.commit
        if begin.encoding == stream_pb2.Begin.ROWS and commit.mutations != self._rows:
            raise self._error(
                f"the commit counts {commit.mutations!r} row change(s) and the batch held "
                f"{self._rows!r}: messages of the batch are missing from the topic; reload "
                "the target from a fresh snapshot",
                offset,
                message,
            )
        self._committed[self._batch_node] = self._batch_id
        batch = self._batch(begin, offset, complete=True, commit=commit)
        self.statistics.batches_committed += 1
        self._discard(committed=True)
        return batch

    def _on_rollback(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        self.statistics.batches_rolled_back += 1
        self._discard(committed=False)
        return None

    def _on_skipped_mutation(
        self, offset: int, message: stream_pb2.Message
    ) -> CommittedBatch | None:
        self._check_batch(offset, message)
        return None

    def _on_skipped_commit(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        self.statistics.resent_batches_skipped += 1
        self._discard(committed=True)
        return None

    def _on_partial(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self.statistics.partial_skipped += 1
        return None

    def _on_begin_while_open(
        self, offset: int, message: stream_pb2.Message
    ) -> CommittedBatch | None:
        raise self._error(
            "begin while a batch is still open: the same publisher must end a batch with "
            "commit or rollback before it begins the next",
            offset,
            message,
        )

    def _on_no_batch_open(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        kind = message.operation.WhichOneof("operation")
        raise self._error(
            f"{kind} without an open batch: the publisher did not send a begin first",
            offset,
            message,
        )

    # Helpers.

    def _held(self) -> int:
        """The mutations the open batch holds (since its last part)."""
        return len(self._mutations) + self._held_rows

    def _batch(
        self,
        begin: stream_pb2.Begin,
        offset: int,
        complete: bool,
        commit: stream_pb2.Commit | None = None,
    ) -> CommittedBatch:
        """The open batch's mutations and markers held so far, positioned after ``offset`` (the
        current publisher's last message)."""
        return CommittedBatch(
            node=self._batch_node,
            batch_id=self._batch_id,
            begin=begin,
            mutations=(
                RowMutations(tuple(self._row_messages), self._held_rows)
                if self._row_messages
                else tuple(self._mutations)
            ),
            markers=tuple(self._markers),
            position=self._position(offset),
            complete=complete,
            commit=commit,
        )

    def _position(self, offset: int) -> StreamPosition:
        """The position after ``offset`` of the partition fed; the other partitions (none is
        fed yet) stay where the validator's position put them."""
        cursors = []
        for number in range(len(self._headers)):
            header = self._headers[number]
            last = offset if number == self._partition else header.floor
            cursors.append(
                PartitionCursor(last + 1, header.publisher or b"", header.sequence, header.epoch)
            )
        return StreamPosition(tuple(cursors), tuple(self._committed.items()))

    def _check_batch(self, offset: int, message: stream_pb2.Message) -> None:
        batch = message.operation.batch
        if batch.id != self._batch_id or batch.node != self._batch_node:
            kind = message.operation.WhichOneof("operation")
            raise self._error(
                f"{kind} for another batch than the open one; a publisher must finish "
                "one batch before it sends anything of the next",
                offset,
                message,
            )

    def _discard(self, committed: bool) -> None:
        """Forget the open batch; one whose parts were handed over and that did not commit
        is reported by ``take_abandoned``."""
        if self._parts_out and not committed:
            self._abandoned = True
            self.statistics.parts_abandoned += 1
        self._parts_out = False
        self._begin = None
        self._mutations = []
        self._row_messages = []
        self._held_rows = 0
        self._markers = []
        self._provenance.reset()
        self._state = State.IDLE

    def _error(self, problem: str, offset: int, message: stream_pb2.Message) -> StreamError:
        header = message.header
        operation = message.operation
        open_batch = (
            f"batch {self._batch_id!r} of node {_uuid_text(self._batch_node)}"
            if self._state is State.OPEN or self._state is State.SKIPPING
            else "no batch"
        )
        return StreamError(
            f"invalid stream at offset {offset!r} (publisher {_uuid_text(header.publisher)}, "
            f"sequence {header.sequence!r}, epoch {header.epoch!r}, "
            f"batch {operation.batch.id!r} of node {_uuid_text(operation.batch.node)}): "
            f"{problem}; validator was in state {self._state.value!r} with {open_batch} open, "
            f"last sequence {self._header.sequence!r} of publisher "
            f"{_uuid_text(self._header.publisher or b'')}"
        )


_S = State
_TRANSITIONS: dict[tuple[State, str | None], _Handler] = {
    (_S.SYNCHRONIZING, "begin"): StreamValidator._on_begin,
    (_S.IDLE, "begin"): StreamValidator._on_begin,
    (_S.OPEN, "begin"): StreamValidator._on_begin_while_open,
    (_S.OPEN, "mutation"): StreamValidator._on_mutation,
    (_S.OPEN, "rows"): StreamValidator._on_rows,
    (_S.OPEN, "schema_change"): StreamValidator._on_marker,
    (_S.OPEN, "watermark"): StreamValidator._on_marker,
    (_S.OPEN, "commit"): StreamValidator._on_commit,
    (_S.OPEN, "rollback"): StreamValidator._on_rollback,
    (_S.SKIPPING, "begin"): StreamValidator._on_begin_while_open,
    (_S.SKIPPING, "commit"): StreamValidator._on_skipped_commit,
    (_S.SKIPPING, "rollback"): StreamValidator._on_rollback,
}
# Everything a batch carries between Begin and Commit (mutations, schema changes,
# watermarks) is handled alike outside an open batch.
for _kind in ("mutation", "rows", "schema_change", "watermark"):
    _TRANSITIONS[(_S.SYNCHRONIZING, _kind)] = StreamValidator._on_partial
    _TRANSITIONS[(_S.IDLE, _kind)] = StreamValidator._on_no_batch_open
    _TRANSITIONS[(_S.SKIPPING, _kind)] = StreamValidator._on_skipped_mutation
for _kind in ("commit", "rollback"):
    _TRANSITIONS[(_S.SYNCHRONIZING, _kind)] = StreamValidator._on_partial
    _TRANSITIONS[(_S.IDLE, _kind)] = StreamValidator._on_no_batch_open
