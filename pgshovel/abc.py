"""Every contract between pgshovel's components, in one place (``typing.Protocol``).

The relay reads a set's PgQ queue through a ``QueueReader``, turns each event
into a protocol mutation with an ``EventDecoder`` and publishes through a
``StreamWriter``. The replication worker reads the published ``Stream``, loads a
consistent snapshot with a ``Loader`` into a ``Target``'s ``SnapshotSink``, and
applies the stream to the ``Target``. Components named in YAML (``path:
module:Name`` plus ``configuration:``) are checked against their contract by
``pgshovel.components.build`` before anything of theirs is called; the
configuration is validated against the type hints of the class's constructor.

The plain values that exist only to cross these boundaries are defined here
too; the richer ones come from the packages that own them (committed batches
and positions from ``pgshovel.stream``, table shapes and key ranges from
``pgshovel.source``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol, runtime_checkable

from pgshovel.protocol import stream_pb2
from pgshovel.source import KeyRange, TableShape
from pgshovel.stream.batches import CommittedBatch, WorkerState

__all__ = [
    "BatchInfo",
    "CopyOut",
    "EventDecoder",
    "EventRow",
    "Loader",
    "MicroBatch",
    "QueueReader",
    "SnapshotSink",
    "Stream",
    "StreamWriter",
    "TableLoadReport",
    "Target",
    "TickInfo",
]

# -- the relay ------------------------------------------------------------------

EventRow = tuple[Any, ...]
"""One event of a batch as selected from PgQ: ``ev_id``, ``ev_time`` (microseconds
since the Unix epoch), ``ev_txid``, ``ev_type``, ``ev_data``, ``ev_extra1`` (schema),
``ev_extra2`` (table), ``ev_extra3`` (set version), ``ev_extra4`` (key columns)."""


@dataclass(frozen=True)
class TickInfo:
    """A PgQ tick: its id, its ``txid_snapshot`` text and when it was taken (µs since epoch)."""

    id: int
    snapshot: str
    timestamp: int


@dataclass(frozen=True)
class BatchInfo:
    """A PgQ batch: the transactions committed between two ticks."""

    id: int
    start: TickInfo
    end: TickInfo


@runtime_checkable
class QueueReader(Protocol):
    """A set's PgQ queue as the relay consumes it.

    Transaction discipline: ``next_batch`` commits the batch assignment at once
    (a re-send keeps its batch id); ``events`` reads inside the batch
    connection's transaction; ``finish`` commits ``pgq.finish_batch`` and is
    called only after the writer acknowledged the whole batch; ``abandon``
    rolls back whatever the batch connection holds, leaving the batch unfinished.
    """

    queue: str

    def check(self) -> None:
        """Fail clearly when the queue or the relay's consumer registration is missing."""
        ...

    def configure_ticker(self, max_lag_seconds: float, max_count: int) -> None:
        """Make ``tick`` tick at most every ``max_lag_seconds`` or ``max_count`` events."""
        ...

    def tick(self) -> int | None:
        """Run the PgQ ticker once (autocommit); the new tick id, if one was made."""
        ...

    def next_batch(self) -> BatchInfo | None:
        """The next batch to publish (the same one again while it is not finished), or None."""
        ...

    def events(self, batch: BatchInfo) -> Iterator[Sequence[EventRow]]:
        """The batch's events in chunks, in event order."""
        ...

    def finish(self, batch: BatchInfo) -> None:
        """Mark the batch done (``pgq.finish_batch``) and commit."""
        ...

    def abandon(self) -> None:
        """Roll back the batch connection's transaction; the batch stays unfinished."""
        ...

    def close(self) -> None:
        """Close every connection."""
        ...


@runtime_checkable
class EventDecoder(Protocol):
    """Turns a queue event into the operation the relay publishes for it."""

    def decode_into(self, event: EventRow, message: stream_pb2.Message) -> None:
        """Write the operation of ``event`` (a ``Mutation``, a ``SchemaChange`` or a
        ``Watermark``) into the empty ``message`` that will carry it; raises ``CodecError``
        or ``SchemaError`` for an event it cannot decode, leaving ``message`` partly written."""
        ...


@runtime_checkable
class StreamWriter(Protocol):
    """Where the relay publishes a set's messages.

    ``bind`` is called once, before anything is pushed, with the set's default
    topic (``<cluster>.<set>``); a topic in the writer's own configuration wins.
    ``push`` hands messages over for delivery in the order given; it may return
    before they are acknowledged, and raises ``BrokerUnavailable`` when delivery
    is already known to have failed. ``flush`` returns only when every message
    pushed so far is durably acknowledged, in order, and raises
    ``BrokerUnavailable`` when that cannot be guaranteed; after either failure
    the writer has dropped what it still held. The relay calls
    ``pgq.finish_batch`` only after ``flush`` returned for the whole batch (one
    flush per batch).
    """

    def bind(self, default_topic: str) -> None:
        """Publish to ``default_topic`` unless the writer was configured with a topic."""
        ...

    def push(self, messages: Sequence[stream_pb2.Message]) -> None:
        """Hand ``messages`` over for delivery, in order."""
        ...

    def flush(self) -> None:
        """Wait until everything pushed is acknowledged."""
        ...

    @property
    def bytes_sent(self) -> int:
        """Bytes of every message acknowledged so far (for metrics)."""
        ...

    def close(self) -> None:
        """Deliver what is still pending and release the connection."""
        ...


# -- the replication worker -------------------------------------------------------

CopyOut = Callable[[IO[bytes]], None]
"""Writes the COPY text of one key range (the loader's read) to the file it is given."""


@dataclass(frozen=True)
class TableLoadReport:
    """What the loader did for one table."""

    table: str
    rows: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float(self.rows)


@dataclass(frozen=True)
class MicroBatch:
    """Whole committed batches read from the stream, in order."""

    batches: tuple[CommittedBatch, ...]
    messages: int
    #: messages between the last one read and the topic's end when it was read
    lag: int


@runtime_checkable
class SnapshotSink(Protocol):
    """Where Spark tasks write snapshot ranges; must pickle (it travels into tasks)."""

    def load_range(self, key_range: KeyRange, copy_out: CopyOut) -> int:
        """Store one range's rows (COPY text from ``copy_out``); return how many."""
        ...


@runtime_checkable
class Loader(Protocol):
    """Copies a consistent snapshot of the tables into a target in parallel."""

    def load(
        self,
        spark: Any,
        source_dsn: str,
        tables: Sequence[TableShape],
        sink: SnapshotSink,
        on_exported: Callable[[str], None],
    ) -> list[TableLoadReport]:
        """Export one snapshot, call ``on_exported(txid_snapshot_text)``, copy every table.

        ``on_exported`` runs after the snapshot is exported and before any row is
        written (the target records that a snapshot load is under way).
        """
        ...


@runtime_checkable
class Stream(Protocol):
    """The validated stream of committed batches from the set's topic."""

    def open(self, default_topic: str) -> None:
        """Connect; ``default_topic`` is used unless the configuration names a topic."""
        ...

    def end_offset(self) -> int:
        """The offset the next message written to the topic will get."""
        ...

    def micro_batches(
        self, state: WorkerState, should_stop: Callable[[], bool]
    ) -> Iterator[MicroBatch]:
        """Validated micro-batches after ``state``; ends when ``should_stop()`` is true."""
        ...

    def close(self) -> None:
        """Release the consumer."""
        ...


@runtime_checkable
class Target(Protocol):
    """Where the replicated tables and the worker's state live.

    Commit order: ``apply`` writes the batches' effect and ``state`` in one
    atomic step, so the stored state always names exactly the last batch
    applied; nothing else stores a stream position.
    """

    def open(self, cluster: str, set_name: str, tables: Sequence[TableShape]) -> WorkerState | None:
        """Connect, create what is missing, return the stored state (None: never loaded)."""
        ...

    def begin_snapshot(self, state: WorkerState) -> None:
        """Empty the set's tables and record that a snapshot load is under way."""
        ...

    def snapshot_sink(self) -> SnapshotSink:
        """Where the loader's Spark tasks write the snapshot."""
        ...

    def finish_snapshot(self, state: WorkerState) -> None:
        """Record that the snapshot is complete; streaming resumes from ``state``."""
        ...

    def apply(self, batches: Sequence[CommittedBatch], state: WorkerState) -> int:
        """Apply the batches and store ``state`` atomically; return the rows written."""
        ...

    def close(self) -> None:
        """Release connections and locks."""
        ...
