"""Every contract between pgshovel's components, in one place (``typing.Protocol``).

The relay reads a set's PgQ queue through a ``QueueReader``, turns each event
into a protocol mutation with an ``EventDecoder`` and publishes through a
``StreamWriter``; the Kafka writer's outputs (``Output``: the set topic, the table
topics) share one ``RecordProducer`` and read topics back with a
``TopicReader``. The replication worker reads the published ``Stream``, loads a
consistent snapshot with a ``Loader`` into a ``SnapshotTarget``'s
``SnapshotSink``, and applies the stream to the ``Target``; a target offers what
it can beyond ``Target`` as capabilities (``SnapshotTarget``, ``ChunkTarget``).
Components named in YAML (``path: module:Name`` plus ``configuration:``) are
checked against their contract by ``pgshovel.components.build`` before anything
of theirs is called; the configuration is validated against the type hints of
the class's constructor.

The plain values that exist only to cross these boundaries are defined here
too; the richer ones come from the packages that own them (committed batches
and positions from ``pgshovel.stream``, table shapes and key ranges from
``pgshovel.source``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    # Only for annotations (``from __future__ import annotations``): the contracts import
    # nothing of the packages that implement or use them at run time.
    from pgshovel.protocol import configuration_pb2, stream_pb2
    from pgshovel.relay.packed_run import PackedRun
    from pgshovel.source import Checksum, Chunk, Column, KeyRange, TableShape
    from pgshovel.stream.batches import CommittedBatch
    from pgshovel.stream.plan import MicroBatchPlan
    from pgshovel.stream.position import StreamPosition
    from pgshovel.stream.rows_builder import EncodedChange, EncodedRun
    from pgshovel.stream.state import WorkerState

__all__ = [
    "TARGET_CAPABILITIES",
    "BatchInfo",
    "ChangedKeys",
    "ChunkSink",
    "ChunkTarget",
    "Comparison",
    "CopyOut",
    "EventDecoder",
    "EventRow",
    "Framer",
    "Loader",
    "MicroBatch",
    "Output",
    "QueueReader",
    "RecordProducer",
    "RowEncoder",
    "SnapshotSink",
    "SnapshotTarget",
    "SourceReader",
    "Stream",
    "StreamWriter",
    "TableLoadReport",
    "Target",
    "TickInfo",
    "TopicReader",
]

# -- the relay ------------------------------------------------------------------

EventRow = tuple[Any, ...]
"""One event of a batch as selected from PgQ: ``ev_id``, ``ev_time`` (microseconds
since the Unix epoch), ``ev_txid``, ``ev_type``, ``ev_data``, ``ev_extra1`` (schema),
``ev_extra2`` (table), ``ev_extra3`` (set version), ``ev_extra4`` (key columns)."""


@dataclass(frozen=True)
class TickInfo:
    """A PgQ tick: its id, its ``txid_snapshot`` text, when it was taken (µs since epoch) and
    the queue's event sequence then (``None`` when unknown): a batch between two ticks with the
    same sequence holds no event."""

    id: int
    snapshot: str
    timestamp: int
    event_seq: int | None = None


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

    def configure_ticker(self, interval: float, max_count: int) -> None:
        """Make ``tick``, called once per ``interval``, tick at each call when there are
        events, and at ``max_count`` events at the latest."""
        ...

    def tick(self) -> int | None:
        """Run the PgQ ticker once (autocommit); the new tick id, if one was made."""
        ...

    def force_tick(self) -> int | None:
        """Tick although no event was written since the last tick; the new tick id, if any."""
        ...

    def last_tick_snapshot(self) -> str | None:
        """The txid snapshot (text) of the queue's latest tick, None before any."""
        ...

    def committed_after(self, snapshot: str) -> bool:
        """Whether events of the queue committed after ``snapshot`` (a tick's) was taken: no
        batch up to that tick holds them (their transactions were in progress at it)."""
        ...

    def next_batch(self) -> BatchInfo | None:
        """The next batch to publish (the same one again while it is not finished), or None."""
        ...

    def events(self, batch: BatchInfo) -> Iterator[Sequence[EventRow | PackedRun]]:
        """The batch's events in chunks, in event order; a run of changes packed as COPY
        lines may come as one ``PackedRun`` in the place of its events."""
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

    def encode_mutation(self, event: EventRow) -> bytes | None:
        """The serialized ``Mutation`` of a mutation ``event``, exactly what ``decode_into``
        writes (the relay's fast path); None for any other event, which the relay then
        decodes with ``decode_into``. Raises the errors ``decode_into`` raises."""
        ...

    def row_encoder(self, partitions: int) -> RowEncoder:
        """The ROWS encoding of this queue's mutation events for a set topic of
        ``partitions`` partitions, sharing this decoder's table shapes (which schema events
        decoded by ``decode_into`` switch)."""
        ...


@runtime_checkable
class RowEncoder(Protocol):
    """Turns a mutation event into a row change of the ROWS encoding (``pgshovel.stream.rows``)."""

    def encode(self, event: EventRow) -> EncodedChange:
        """The row change of a mutation ``event`` and the set topic partitions it goes to;
        raises ``CodecError`` or ``SchemaError`` for an event it cannot encode."""
        ...

    def encode_run(self, events: Sequence[EventRow]) -> EncodedRun | None:
        """The row changes of a run of mutation events sharing type, time, transaction, table,
        set version and key columns, all to partition 0, checked as ``encode`` checks each;
        None when the events must go through ``encode`` one by one (which then raises the
        error of the first event at fault)."""
        ...

    def encode_packed(self, run: PackedRun) -> EncodedRun | None:
        """The row changes of a run of COPY lines, all to partition 0, its lines forwarded as
        they are; None when the run must go through its events (``PackedRun.events``)."""
        ...

    def encode_packed_routes(
        self, run: PackedRun
    ) -> tuple[EncodedRun, list[tuple[int, ...]]] | None:
        """The same for a set topic of several partitions, with the partitions each change's
        rows' keys go to."""
        ...


@runtime_checkable
class Framer(Protocol):
    """Frames a set's PgQ batches into set-topic messages and keeps the publisher identity.

    ``begin`` opens a batch, ``add`` frames a chunk of its events, ``commit`` closes it;
    ``take`` returns what was framed since the last ``take`` and the partition of each
    message, for the relay to push (``ready``: enough to push now). After a failure
    ``roll_back(certain)``: with ``certain`` (Kafka holds exactly what was taken) rewind
    past what was not taken and return the Rollback messages to push, with their
    partitions (none when nothing of the batch was taken); else start a new publisher
    identity, which readers take as abandoning the open batch, and return nothing.
    """

    def begin(
        self,
        batch: stream_pb2.BatchIdentifier,
        start: stream_pb2.Tick,
        end: stream_pb2.Tick,
        set_version: str,
    ) -> None: ...

    def add(self, events: Sequence[EventRow | PackedRun]) -> None: ...

    def commit(self) -> None: ...

    @property
    def ready(self) -> bool: ...

    def take(self) -> tuple[list[stream_pb2.Message], list[int]]: ...

    def restore(self, messages: list[stream_pb2.Message], partitions: list[int]) -> None:
        """Hand back what the last ``take`` returned: its push failed, nothing of it was sent
        (or that is uncertain, and ``roll_back(False)`` follows)."""
        ...

    def roll_back(self, certain: bool) -> tuple[list[stream_pb2.Message], list[int]]: ...


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

    def framer(self, decoder: EventDecoder, epoch: int) -> Framer:
        """How the relay frames batches for this writer: the encoding, the partitions and the
        message size it is configured with (``pgshovel.relay.framing``)."""
        ...

    def push(
        self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
    ) -> None:
        """Hand ``messages`` over for delivery, in order, each to its set topic partition
        (``partitions``, parallel to ``messages``; None: all to partition 0)."""
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

    def last_committed_begin(self) -> stream_pb2.Message | None:
        """The Begin of the last batch the stream holds whole (None: none yet); the relay
        checks after connecting that its source knows that batch's end tick."""
        ...


@runtime_checkable
class SourceReader(Protocol):
    """A ``StreamWriter`` that also reads the source itself (table-topic snapshots).

    The relay calls ``attach_source`` while leading, before it publishes a batch,
    and again whenever it reconnects to the source.
    """

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """Read the source at ``dsn`` (the relay's own login); the set is ``configuration``."""
        ...


# -- the relay's outputs ----------------------------------------------------------


@runtime_checkable
class RecordProducer(Protocol):
    """The relay's one Kafka producer as its outputs see it.

    Every output produces through the same producer, in the order it is called,
    so one ``flush`` acknowledges what all of them produced. ``produce`` and
    ``produce_values`` queue asynchronously; a message larger than the producer
    may send raises ``MessageTooLarge`` before anything of the call is queued
    (for ``produce_values``: before the first value), so Kafka holds exactly what
    was produced before it. ``BrokerUnavailable`` (or a ``MessageTooLarge`` with
    ``dropped``) means the producer dropped everything it still held.
    """

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None) -> int:
        """Queue one message (``value`` None: a tombstone); return its size in bytes."""
        ...

    def produce_values(self, topic: str, values: Sequence[bytes]) -> int:
        """Queue keyless ``values`` in order, all or none; return their size in bytes."""
        ...

    def flush(self) -> None:
        """Wait until everything produced so far is acknowledged, or raise."""
        ...

    def ensure_topic(
        self,
        topic: str,
        *,
        cleanup_policy: str,
        partitions: int,
        replication_factor: int,
        create: bool = True,
    ) -> None:
        """Create ``topic`` if it is missing (and ``create``); else the broker auto-creates it."""
        ...


@runtime_checkable
class TopicReader(Protocol):
    """Reads topics back (the table topics' TRUNCATE and snapshots)."""

    def live_keys(self, topic: str) -> dict[bytes, bytes]:
        """The last value of every key of the compacted ``topic`` (tombstones removed)."""
        ...

    def holds_messages(self, topic: str) -> bool:
        """Whether ``topic`` exists and holds a message."""
        ...


@runtime_checkable
class Output(Protocol):
    """One form in which the relay publishes a set's stream (the set topic, the table topics).

    A writer holds a list of outputs sharing one ``RecordProducer``; it hands each
    of them every message it is pushed, in order. Order of effects for a batch:

    1. ``push`` with the batch's messages in order (Begin first, Commit or Rollback
       last, possibly over several calls): the output produces what it makes of them;
    2. the producer's ``flush``: every output's messages are acknowledged together;
    3. ``acknowledged``: the output may produce records vouching for what was just
       acknowledged (table-topic snapshot progress), flushed before the relay calls
       ``pgq.finish_batch``.

    A data error in ``push`` leaves the output's earlier messages of the push
    queued; the set topic's output produces nothing of a push that fails. After any
    failure of the producer every output's ``abandon`` is called: it forgets what it
    had in flight (the batch is framed again). ``attach_source`` runs before the
    first batch and on every reconnect with the set's current configuration.
    """

    def attach_source(
        self, dsn: str, configuration: configuration_pb2.ReplicationSetConfiguration
    ) -> None:
        """The source the relay reads (the relay's own login) and the set as it is now."""
        ...

    def push(
        self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
    ) -> int:
        """Produce what this output makes of ``messages`` (each of the set topic's partition in
        ``partitions``; None: all of partition 0); return the bytes produced. A push holds
        whole rounds of a ROWS batch (``pgshovel.relay.framing``)."""
        ...

    def acknowledged(self) -> int:
        """Everything produced so far is acknowledged: produce what vouches for it; return the
        bytes produced."""
        ...

    def abandon(self) -> None:
        """The producer dropped what it held: forget what is in flight."""
        ...

    def describe(self, topic: str, key: bytes | None, value: bytes | None) -> str | None:
        """Name the table and key of a message this output produced (None: not one of its)."""
        ...

    def close(self) -> None:
        """Stop what runs in the background; the producer is closed by the writer."""
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
    """Whole committed batches read from the stream, in order — or one part of a batch too
    large to hold whole (``batches[0].complete`` False; see ``CommittedBatch``).

    A consumer applies a part without committing it, keeps applying the following
    parts in the same target transaction, and commits with the batch's last part
    (the first batch of a later micro-batch). ``abandon`` says that the batch whose
    parts it applied ended without Commit: discard them, then apply ``batches``.
    """

    batches: tuple[CommittedBatch, ...]
    messages: int
    #: messages between the last one read and the topic's end when it was read
    lag: int
    abandon: bool = False


@runtime_checkable
class SnapshotSink(Protocol):
    """Where Spark tasks write snapshot ranges; must pickle (it travels into tasks)."""

    def load_range(self, key_range: KeyRange, copy_out: CopyOut) -> int:
        """Store one range's rows (COPY text from ``copy_out``); return how many."""
        ...


@runtime_checkable
class ChunkSink(Protocol):
    """Where an incremental snapshot's chunk readers stage what they read, before the high
    watermark (must pickle: it may travel into Spark tasks)."""

    def stage_rows(
        self, attempt: str, table: TableShape, copy_out: CopyOut, *, selected: bool = False
    ) -> int:
        """Store the rows ``copy_out`` writes (COPY text) for ``attempt``; return how many.
        With ``selected`` (a filtered chunk) each row has one more column, whether the
        source's filter selected it (the others hold only their key); then return how many
        were selected."""
        ...

    def stage_checksums(self, attempt: str, checksums: list[Checksum]) -> None:
        """Store the source's checksums of ``attempt``'s range."""
        ...


@dataclass(frozen=True)
class Comparison:
    """A chunk's range compared between source and target, bucket by bucket."""

    #: buckets compared and equal
    equal: frozenset[int]
    #: buckets compared and different: (rows in the source, rows in the copy)
    differing: dict[int, tuple[int, int]]
    #: buckets the stream changed while the source was read: not comparable this time
    skipped: frozenset[int]

    @classmethod
    def of(
        cls,
        source: dict[int, tuple[int, int]],
        copy: dict[int, tuple[int, int]],
        skipped: set[int],
    ) -> Comparison:
        """Compare per-bucket (rows, hash sum) of both sides, leaving ``skipped`` out."""
        buckets = set(source) | set(copy)
        compared = buckets - skipped
        differing = {
            bucket: (source.get(bucket, (0, 0))[0], copy.get(bucket, (0, 0))[0])
            for bucket in compared
            if source.get(bucket) != copy.get(bucket)
        }
        return cls(frozenset(compared - set(differing)), differing, frozenset(buckets & skipped))


#: Key values (text) of the rows the stream changed while a chunk was read.
ChangedKeys = Collection[tuple[str | None, ...]]


@runtime_checkable
class Loader(Protocol):
    """Copies a consistent snapshot of the tables into a target in parallel."""

    def load(
        self,
        spark: Any,
        source_dsn: str,
        read_tables: Callable[[Any], list[TableShape]],
        sink: SnapshotSink,
        on_exported: Callable[[str, list[TableShape]], None],
    ) -> list[TableLoadReport]:
        """Export one snapshot, read the tables' shapes in it, copy every table.

        ``read_tables(connection)`` reads the shapes through the connection whose
        transaction exported the snapshot, so they are the shapes the copied rows
        have; ``on_exported(txid_snapshot_text, shapes)`` runs after that and before
        any row is written (the target records that a snapshot load is under way).
        """
        ...


@runtime_checkable
class Stream(Protocol):
    """The validated stream of committed batches from the set's topic."""

    def open(self, default_topic: str) -> None:
        """Connect; ``default_topic`` is used unless the configuration names a topic."""
        ...

    def start_position(self) -> StreamPosition:
        """The position before the next message written to the topic (every partition): the
        loader notes it before it exports its snapshot."""
        ...

    def micro_batches(
        self, state: WorkerState, should_stop: Callable[[], bool]
    ) -> Iterator[MicroBatch]:
        """Validated micro-batches after ``state``; ends when ``should_stop()`` is true.

        While nothing new arrives it yields an empty micro-batch about once per poll
        timeout, so the worker keeps control (requests, incremental snapshots)."""
        ...

    def close(self) -> None:
        """Release the consumer."""
        ...


@runtime_checkable
class Target(Protocol):
    """Where the replicated tables and the worker's state live: what every target offers.

    Commit order: ``apply`` writes the batches' effect and ``state`` in one
    atomic step, so the stored state always names exactly the last batch
    applied; nothing else stores a stream position (the state, position
    included, is one document: ``WorkerState.to_document``). A batch too large to
    hold whole is applied part by part with ``commit=False`` (the effect stays
    uncommitted: an open transaction, files no state refers to yet), then its
    last part with ``commit=True`` commits everything with ``state``; while parts
    are uncommitted the worker calls nothing but ``apply``, ``abandon`` and
    ``close`` (which discards them too).

    What else a target can do are capabilities the worker asks for with
    ``isinstance``: ``SnapshotTarget`` (load a consistent snapshot: without it a
    target must already hold a state) and ``ChunkTarget`` (incremental snapshots:
    backfill of added tables, re-snapshot, verify and repair; without it those are
    refused).
    """

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        """Connect, take the set's lock, return the stored state (None: never loaded); a
        ``StateError`` naming the field and the reload when the stored state does not read."""
        ...

    def apply(self, plan: MicroBatchPlan, state: WorkerState, commit: bool = True) -> int:
        """Apply a micro-batch's steps in order and store ``state`` atomically; return the
        rows written. Mutations of a ``Segment`` are applied with their run's table shape; a
        ``SchemaStep`` creates, alters, drops or leaves a table (see ``pgshovel.stream.plan``).
        With ``commit`` False (a part of a batch) the effect is left uncommitted and
        ``state`` is not stored; the next ``apply`` continues from it."""
        ...

    def abandon(self) -> None:
        """Discard the effect of the uncommitted applies (a batch that rolled back after
        some of its parts were applied); the target is as the last commit left it."""
        ...

    def store_state(self, state: WorkerState) -> None:
        """Store ``state`` alone (requests taken, incremental snapshot progress)."""
        ...

    def can_alter_type(self, old: Column, new: Column) -> bool:
        """Whether this target converts a column's values to a new type exactly by itself
        (else the worker copies the table again after the change)."""
        ...

    def close(self) -> None:
        """Release connections and locks."""
        ...


@runtime_checkable
class SnapshotTarget(Target, Protocol):
    """A target that loads a consistent snapshot of the set's tables (the worker's start)."""

    def begin_snapshot(self, state: WorkerState) -> None:
        """Create ``state.tables`` afresh and empty, and record that a snapshot load is under
        way."""
        ...

    def snapshot_sink(self) -> SnapshotSink:
        """Where the loader's Spark tasks write the snapshot."""
        ...

    def finish_snapshot(self, state: WorkerState) -> None:
        """Record that the snapshot is complete; streaming resumes from ``state``."""
        ...


@runtime_checkable
class ChunkTarget(Target, Protocol):
    """A target that takes incremental snapshots chunk by chunk while streaming: backfill of
    an added table, re-snapshot, verify and repair."""

    def can_filter(self) -> bool:
        """Whether this target evaluates a ``set resnapshot --where`` condition on its rows
        (a re-snapshot with a filter is refused on a target that cannot)."""
        ...

    def chunk_sink(self) -> ChunkSink:
        """Where chunk readers stage rows and checksums."""
        ...

    def merge_chunk(
        self,
        chunk: Chunk,
        changed: ChangedKeys,
        state: WorkerState,
        *,
        replay: Sequence[stream_pb2.Mutation] = (),
    ) -> int:
        """Make the chunk's range of the copy hold exactly the staged rows, except the rows
        whose keys are in ``changed`` (the stream brought their state), and store ``state``,
        atomically; return the rows written. An unkeyed table's chunk (the whole table)
        gets the staged rows, then ``replay`` applied in order: the table's mutations the
        read did not see. The staged data is dropped."""
        ...

    def compare_chunk(
        self,
        chunk: Chunk,
        changed: ChangedKeys,
        *,
        replay: Sequence[stream_pb2.Mutation] = (),
    ) -> Comparison:
        """Compare the chunk's range of the copy with the staged source checksums, leaving
        out the buckets of the keys in ``changed``; an unkeyed table's copy is compared as
        it was before ``replay`` (the mutations the source's read did not see). The staged
        data is dropped."""
        ...

    def drop_staging(self, attempts: Collection[str] | None = None) -> None:
        """Remove what chunk readers staged for ``attempts`` (None: everything staged for this
        set, left by a crash)."""
        ...


#: The capabilities a target may offer beyond ``Target``.
TARGET_CAPABILITIES: tuple[type[Any], ...] = (SnapshotTarget, ChunkTarget)
