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
to its transaction's provenance, ``pgshovel.stream.provenance``), and recognises re-sent batches (a
PgQ batch id at or below the last one committed for its node) so that they are
consumed but never emitted twice. A batch too large to hold whole is handed over
in parts (``take_part``) as it arrives; if it then rolls back or its publisher is
replaced, ``take_abandoned`` tells the consumer to discard the parts it applied
(it applies them uncommitted until the last part). A validator started without a position (a
reader joining mid-topic) trusts the first publisher it sees and skips the tail
of the batch in progress until the first Begin: that tail's transactions were
committed before the reader chose its start offset, so the snapshot it loaded
already holds them. After a ``StreamError`` the validator is broken: stop.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch, Marker, StreamPosition
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


class StreamValidator:
    """Validates one partition's messages in offset order; see the module documentation."""

    def __init__(self, position: StreamPosition | None = None) -> None:
        self.statistics = ValidatorStatistics()
        self._committed: dict[bytes, int] = {}
        self._retired: set[bytes] = set()
        self._warned: set[bytes] = set()
        self._batch_id = 0
        self._batch_node = b""
        self._begin: stream_pb2.Begin | None = None
        self._mutations: list[stream_pb2.Mutation] = []
        self._markers: list[Marker] = []
        self._provenance = ProvenanceResolver()
        #: offset of the last message of the open batch
        self._last_offset = -1
        #: parts of the open batch handed over; its end must be reported (take_abandoned)
        self._parts_out = False
        self._abandoned = False
        if position is None:
            self._state = State.SYNCHRONIZING
            self._publisher: bytes | None = None
            self._sequence = -1
            self._epoch = 0
            self._highest_epoch = 0
            self._floor_offset = -1
        else:
            self._state = State.IDLE
            self._publisher = position.publisher
            self._sequence = position.sequence
            self._epoch = position.epoch
            self._highest_epoch = position.epoch
            self._floor_offset = position.offset
            self._committed.update(position.committed)

    @property
    def state(self) -> State:
        return self._state

    @property
    def publisher(self) -> bytes | None:
        """The current publisher's uuid, None before the first message."""
        return self._publisher

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
        if offset <= self._floor_offset:
            # At or before the resume position: already consumed.
            self.statistics.duplicates_skipped += 1
            return None
        if not message.HasField("header"):
            raise self._error("message has no header", offset, message)
        header = message.header
        if header.publisher == self._publisher:
            sequence = header.sequence
            if sequence <= self._sequence:
                self.statistics.duplicates_skipped += 1
                return None
            if sequence != self._sequence + 1:
                raise self._error(
                    f"sequence gap: expected sequence {self._sequence + 1!r} next, "
                    f"{sequence - self._sequence - 1!r} message(s) are missing; the topic lost "
                    "messages (retention, an unordered producer, a topic with more than one "
                    "partition); reload the target from a fresh snapshot",
                    offset,
                    message,
                )
            if header.epoch != self._epoch:
                raise self._error(
                    f"publisher changed its epoch from {self._epoch!r} to {header.epoch!r}; "
                    "a relay must start a new publisher for a new epoch",
                    offset,
                    message,
                )
            self._sequence = sequence
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
        if self._state is not State.OPEN or len(self._mutations) < max(at_least, 1):
            return None
        begin = self._begin
        if begin is None:  # pragma: no cover - OPEN always has a Begin
            return None
        part = self._held(begin, self._last_offset, complete=False)
        self._mutations = []
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
                    _uuid_text(self._publisher or b""),
                    offset,
                )
            return False
        if header.sequence != 0 and self._state is not State.SYNCHRONIZING:
            raise self._error(
                f"new publisher starts at sequence {header.sequence!r} instead of 0, taking "
                f"over from publisher {_uuid_text(self._publisher or b'')} "
                f"(epoch {self._epoch!r}); its first messages are missing from the topic",
                offset,
                message,
            )
        if self._publisher is not None:
            self._retired.add(self._publisher)
            logger.info(
                "publisher %s (epoch %d) took over from publisher %s (epoch %d) at offset %d",
                _uuid_text(publisher),
                header.epoch,
                _uuid_text(self._publisher),
                self._epoch,
                offset,
            )
        if self._state is State.OPEN or self._state is State.SKIPPING:
            # The old relay never finished this batch; the new one re-sends it.
            self.statistics.batches_abandoned += 1
            self._discard(committed=False)
        self._publisher = publisher
        self._sequence = header.sequence
        self._epoch = header.epoch
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
        self._markers = []
        self._provenance.reset()
        self._last_offset = offset
        self._state = State.OPEN
        return None

    def _on_mutation(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        mutation = message.operation.mutation
        problem = self._provenance.resolve(mutation)
        if problem:
            raise self._error(f"{problem}; it was not written by a pgshovel relay", offset, message)
        self._mutations.append(mutation)
        self._last_offset = offset
        return None

    def _on_marker(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        self._last_offset = offset
        operation = message.operation
        kind = operation.WhichOneof("operation")
        marker = operation.schema_change if kind == "schema_change" else operation.watermark
        self._markers.append((len(self._mutations), marker))
        return None

    def _on_commit(self, offset: int, message: stream_pb2.Message) -> CommittedBatch | None:
        self._check_batch(offset, message)
        begin = self._begin
        if begin is None:  # pragma: no cover - OPEN always has a Begin
            raise self._error("open batch lost its begin", offset, message)
        self._committed[self._batch_node] = self._batch_id
        batch = self._held(begin, offset, complete=True)
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

    def _held(self, begin: stream_pb2.Begin, offset: int, complete: bool) -> CommittedBatch:
        """The open batch's mutations and markers held so far, positioned at ``offset`` (the
        current publisher's last message)."""
        return CommittedBatch(
            node=self._batch_node,
            batch_id=self._batch_id,
            begin=begin,
            mutations=tuple(self._mutations),
            markers=tuple(self._markers),
            position=StreamPosition(
                offset=offset,
                publisher=self._publisher or b"",
                sequence=self._sequence,
                epoch=self._epoch,
                committed=tuple(self._committed.items()),
            ),
            complete=complete,
        )

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
            f"last sequence {self._sequence!r} of publisher "
            f"{_uuid_text(self._publisher or b'')}"
        )


_S = State
_TRANSITIONS: dict[tuple[State, str | None], _Handler] = {
    (_S.SYNCHRONIZING, "begin"): StreamValidator._on_begin,
    (_S.IDLE, "begin"): StreamValidator._on_begin,
    (_S.OPEN, "begin"): StreamValidator._on_begin_while_open,
    (_S.OPEN, "mutation"): StreamValidator._on_mutation,
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
for _kind in ("mutation", "schema_change", "watermark"):
    _TRANSITIONS[(_S.SYNCHRONIZING, _kind)] = StreamValidator._on_partial
    _TRANSITIONS[(_S.IDLE, _kind)] = StreamValidator._on_no_batch_open
    _TRANSITIONS[(_S.SKIPPING, _kind)] = StreamValidator._on_skipped_mutation
for _kind in ("commit", "rollback"):
    _TRANSITIONS[(_S.SYNCHRONIZING, _kind)] = StreamValidator._on_partial
    _TRANSITIONS[(_S.IDLE, _kind)] = StreamValidator._on_no_batch_open
