"""Table-topic snapshots in chunks between watermarks, while the relay keeps publishing.

The table-topics output hands every operation it is pushed to
``ChunkedSnapshots``. A table topic without a finished snapshot (``_progress``)
gets a task; the task's chunks are read one at a time by a reader thread
(``_chunk_read.read_table_chunk``: low watermark, rows, high watermark) while
batches go on being published, table topics included. The window of each
chunk is followed in the stream (``_window``);
after the Commit of the batch holding its high watermark the chunk's rows
whose keys the stream did not change go out as reads (``op: r``).

Order of effects for one chunk (the contract: at least once, per-key order):

1. the reader thread reads and decodes the rows;
2. after the Commit of the high watermark's batch, the surviving rows are
   produced to the table topic as reads (``op: r``), and the next chunk starts;
3. once the producer's flush acknowledged that batch (rows included), the
   progress record (the next chunk's lower bound, or done) is produced to the
   snapshots topic and flushed (``acknowledged``).

A relay killed anywhere goes on from the last recorded bound: at most the open
chunk is read and published again.

A topic that already holds messages when its snapshot starts (it ran with
``snapshot: false``, or its record was lost) may hold keys the table no longer
has. Their keys are read back first (``read_state``: the keys only are kept);
every key a chunk publishes or a change of the table touches is struck off, and
when the last chunk is published the keys left get tombstones. That is exact:
a key left was in no chunk (so not in the table when its range was read) and
no change since the start brought it back. Such a *sweeping* snapshot records
no progress until it is done (the keys are in memory only), so a relay killed
in the middle starts it over. Any producer failure forgets every flight and
the progress it had in memory; both are read back from Kafka before the next
batch. A chunk whose table was truncated or changed shape in its window, or
whose read failed transiently, is read again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from pgshovel.errors import ConfigurationError, PgshovelError, TransientError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.table_topics._chunk_read import ChunkRead, read_table_chunk
from pgshovel.relay.table_topics._progress import Bound, Progress, parse_progress
from pgshovel.relay.table_topics._translator import Record, TableTopicTranslator
from pgshovel.relay.table_topics._window import Flight, WindowTracker, surviving
from pgshovel.stream.handoff import Snapshot, is_visible

__all__ = ["ChunkedSnapshots", "SnapshotOutput"]

logger = logging.getLogger(__name__)

Identity = tuple[str, str]
#: How a chunk is read (``read_table_chunk``'s signature; tests may slow it down).
ChunkReader = Callable[
    [str, str, str, configuration_pb2.TableConfiguration, str, Bound | None, int], ChunkRead
]


class SnapshotOutput(Protocol):
    """What the snapshots need of the table-topics output."""

    def produce(self, records: Sequence[Record]) -> int:
        """Produce ``records`` in order (asynchronously); returns their size in bytes."""
        ...

    def read_state(self, topic: str) -> dict[bytes, bytes]:
        """The last value of every key of the compacted ``topic`` (tombstones removed)."""
        ...

    def holds_messages(self, topic: str) -> bool:
        """Whether ``topic`` exists and holds a message."""
        ...


@dataclass
class _Task:
    """One table topic being snapshotted: where its next chunk starts."""

    topic: str
    schema: str
    table: str
    progress: Progress
    #: the flight reading its next chunk, if any
    attempt: str = ""
    future: Future[ChunkRead] | None = None
    started: float = field(default_factory=time.monotonic)
    failures: int = 0
    #: sweeping: the keys the topic held at the start that nothing confirmed yet
    stale: set[bytes] | None = None


class ChunkedSnapshots:
    """Snapshots of new table topics, chunk by chunk, between the batches the writer frames."""

    def __init__(
        self,
        *,
        translator: TableTopicTranslator,
        output: SnapshotOutput,
        state_topic: str,
        prefix: str,
        chunk_rows: int,
        reader: ChunkReader = read_table_chunk,
        excluded: frozenset[Identity] = frozenset(),
    ) -> None:
        self.translator = translator
        self.output = output
        self.state_topic = state_topic
        self.prefix = prefix
        self.chunk_rows = chunk_rows
        self.reader = reader
        #: tables left out of the table topics (``table_topics.exclude``): never snapshotted
        self.excluded = excluded
        self.source: tuple[str, str, str] | None = None
        self.tables: dict[Identity, configuration_pb2.TableConfiguration] = {}
        self._progress: dict[str, Progress] | None = None
        self._tasks: dict[str, _Task] = {}
        self._skip: set[str] = set()
        self._tracker = WindowTracker()
        self._pool: ThreadPoolExecutor | None = None
        self._started = False
        self._sequence = 0
        #: table topics this process started a snapshot of
        self._begun: set[str] = set()
        #: table topics whose snapshot must sweep stale keys (until one records "done")
        self._sweeping: set[str] = set()
        #: progress records of chunks produced but not acknowledged yet
        self._unacked: list[Record] = []
        #: tables met in a mutation, and the older relays' snapshots their changes are checked by
        self._seen: set[Identity] = set()
        self._legacy: dict[Identity, Snapshot] = {}

    # -- configuration -------------------------------------------------------------

    def attach(
        self,
        dsn: str,
        cluster: str,
        queue: str,
        configuration: configuration_pb2.ReplicationSetConfiguration,
    ) -> None:
        """Where chunks are read and watermarks written; the set's tables.

        Called again whenever the relay connects to the source (after a failure, a
        move to another database, leadership won again): the snapshots go on from
        what Kafka holds (another relay may have led meanwhile), and a chunk in
        flight is read again (its watermarks may be in a queue no longer read)."""
        self.abandon()
        self.source = (dsn, cluster, queue)
        for table in configuration.tables:
            schema = table.schema or "public"
            self.tables[(schema, table.name)] = configuration_pb2.TableConfiguration(
                schema=schema,
                name=table.name,
                key_columns=list(table.key_columns),
                columns=list(table.columns),
            )

    def close(self) -> None:
        self.abandon()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abandon(self) -> None:
        """After a producer failure: forget flights and progress (read back before the next
        batch)."""
        self._tracker.clear()
        self._tasks.clear()
        self._unacked.clear()
        self._progress = None
        self._started = False
        self._seen.clear()
        self._legacy.clear()

    # -- following the stream ------------------------------------------------------

    def begin(self) -> None:
        """A batch starts; the first one starts a task per set table without a snapshot."""
        self._tracker.begin()
        if not self._started:
            self._load()
            for schema, table in list(self.tables):
                self.ensure(schema, table)
            self._started = True
        self._launch()

    def skips(self, mutation: stream_pb2.Mutation) -> bool:
        """Whether ``mutation`` (of a keyed table) is left out; its table gets a task if its
        topic has no snapshot yet. Left out: changes of a table snapshotted in one snapshot
        by an older relay, made by a transaction that snapshot saw."""
        identity = (mutation.schema, mutation.table)
        if identity not in self._seen:
            self.ensure(*identity)
            progress = self._load().get(self.translator.topic(*identity))
            if progress is not None and progress.legacy is not None:
                self._legacy[identity] = progress.legacy
            self._seen.add(identity)
        legacy = self._legacy.get(identity)
        return legacy is not None and is_visible(mutation.transaction, legacy)

    def changed(self, schema: str, table: str, records: Sequence[Record]) -> None:
        """The table-topic records of one mutation (their keys are the keys it touched)."""
        identity = (schema, table)
        topic = self.translator.topic(schema, table)
        task = self._tasks.get(topic)
        watched = self._tracker.watches(identity)
        if watched or (task is not None and task.stale):
            keys = {r.key for r in records if r.topic == topic and r.key is not None}
            if watched:
                self._tracker.changed(identity, keys)
            if task is not None and task.stale:
                task.stale -= keys

    def truncated(self, schema: str, table: str) -> None:
        self._tracker.whole((schema, table))
        task = self._tasks.get(self.translator.topic(schema, table))
        if task is not None and task.stale:
            task.stale.clear()  # the TRUNCATE tombstoned every key the topic held

    def schema_change(self, change: stream_pb2.SchemaChange) -> None:
        """A table's shape changed, it was added to the set or renamed (a new topic name)."""
        self._tracker.whole((change.schema, change.table), change.relation)
        if change.kind in (stream_pb2.SchemaChange.DROP, stream_pb2.SchemaChange.REMOVE):
            self.tables.pop((change.schema, change.table), None)
            task = self._tasks.pop(self.translator.topic(change.schema, change.table), None)
            if task is not None:
                self._tracker.drop(task.attempt)
                logger.info(
                    "%s.%s left the set or was dropped: its topic's snapshot stops",
                    change.schema,
                    change.table,
                )
            return
        if change.kind in (stream_pb2.SchemaChange.ANNOUNCE, stream_pb2.SchemaChange.ALTER):
            shape = change.shape
            if shape.name:
                self.tables[(shape.schema, shape.name)] = configuration_pb2.TableConfiguration(
                    schema=shape.schema,
                    name=shape.name,
                    key_columns=list(shape.key),
                    columns=[column.name for column in shape.columns],
                )
            self._skip.discard(self.translator.topic(change.schema, change.table))
            self._seen.discard((change.schema, change.table))
            self.ensure(change.schema, change.table)

    def watermark(self, request: str) -> None:
        self._tracker.watermark(request)

    def rollback(self) -> None:
        self._tracker.rollback()

    def acknowledged(self) -> list[Record]:
        """Everything produced so far is acknowledged: the progress records to produce now."""
        records, self._unacked = self._unacked, []
        return records

    def commit(self) -> int:
        """The batch's Commit was produced: publish the chunks whose window closed, start the
        next ones. Returns the bytes produced."""
        size = 0
        for flight in self._tracker.commit():
            size += self._finish(flight)
        self._collect_failures()
        self._launch()
        return size

    # -- tasks ---------------------------------------------------------------------

    def ensure(self, schema: str, table: str) -> None:
        """A task for ``schema.table`` unless its topic's snapshot is done or under way."""
        if (schema, table) in self.excluded:
            return
        topic = self.translator.topic(schema, table)
        if topic in self._tasks or topic in self._skip:
            return
        progress = self._load().get(topic)
        if progress is not None and progress.done:
            return
        if progress is not None and (progress.schema, progress.table) != (schema, table):
            progress = None  # another table had this topic name: start over
        stale: set[bytes] | None = None
        if progress is None:
            progress = Progress(schema, table)
            # (A snapshot this process started, then forgot after a producer failure, has
            # published into the topic itself: only a sweep it began must begin again.)
            if topic in self._sweeping or (
                topic not in self._begun and self.output.holds_messages(topic)
            ):
                stale = set(self.output.read_state(topic))
                self._sweeping.add(topic)
                logger.info(
                    "table topic %r already holds %d key(s) but no snapshot of %s.%s: the "
                    "snapshot tombstones those it does not find in the table",
                    topic,
                    len(stale),
                    schema,
                    table,
                )
        self._tasks[topic] = _Task(topic, schema, table, progress, stale=stale)
        self._begun.add(topic)
        logger.info(
            "table topic %r: snapshot of %s.%s %s",
            topic,
            schema,
            table,
            "starts" if progress.next is None else f"goes on from key {list(progress.next)!r}",
        )

    def _load(self) -> dict[str, Progress]:
        if self._progress is None:
            recorded = self.output.read_state(self.state_topic)
            self._progress = {
                key.decode("utf-8"): parse_progress(key.decode("utf-8"), value)
                for key, value in recorded.items()
            }
        return self._progress

    def _launch(self) -> None:
        """Start the next chunk of the first task without one in flight (one chunk at a time)."""
        if not self._tasks:
            return
        if self.source is None:
            topic = next(iter(self._tasks))
            raise ConfigurationError(
                f"table topic {topic!r} needs a snapshot but the relay cannot read the source "
                "(it runs outside pgshovel-relay); set table_topics.snapshot: false"
            )
        if any(task.future is not None for task in self._tasks.values()):
            return
        for task in self._tasks.values():
            dsn, cluster, queue = self.source
            self._sequence += 1
            attempt = f"{self.prefix}.{uuid.uuid4().hex[:8]}.{self._sequence}"
            configuration = self.tables.get(
                (task.schema, task.table),
                configuration_pb2.TableConfiguration(schema=task.schema, name=task.table),
            )
            self._tracker.open(attempt, (task.schema, task.table))
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="table-chunk")
            task.attempt = attempt
            task.future = self._pool.submit(
                self.reader,
                dsn,
                cluster,
                queue,
                configuration,
                attempt,
                task.progress.next,
                self.chunk_rows,
            )
            return

    def _task_of(self, attempt: str) -> _Task | None:
        return next((task for task in self._tasks.values() if task.attempt == attempt), None)

    def _retry(self, task: _Task) -> None:
        self._tracker.drop(task.attempt)
        task.attempt, task.future = "", None

    def _collect_failures(self) -> None:
        """Reads that ended without watermarks to wait for: failed, or nothing to read."""
        for task in list(self._tasks.values()):
            future = task.future
            if future is None or not future.done():
                continue
            error = future.exception()
            if error is not None:
                self._failed(task, error)
                continue
            read = future.result()
            if read.status != "read":
                self._gone(task, read)

    def _failed(self, task: _Task, error: BaseException) -> None:
        self._retry(task)
        task.failures += 1
        label = f"{task.schema}.{task.table}"
        if isinstance(error, TransientError) or task.failures < 3:
            # A rename or DDL racing the read fails it once: the next read sees the new shape.
            logger.warning("reading a chunk of %s failed (%s); it is read again", label, error)
            return
        if isinstance(error, PgshovelError):
            raise error
        raise RuntimeError(f"reading a chunk of {label} failed: {error}") from error

    def _gone(self, task: _Task, read: ChunkRead) -> None:
        self._retry(task)
        del self._tasks[task.topic]
        self._skip.add(task.topic)
        if read.status == "missing":
            logger.info(
                "table %s.%s no longer exists: its topic %r gets no snapshot",
                task.schema,
                task.table,
                task.topic,
            )

    def _finish(self, flight: Flight) -> int:
        task = self._task_of(flight.attempt)
        if task is None or task.future is None:
            return 0  # a flight of a task given up since
        # The high watermark is written last: the read is done (or ends in a moment).
        read = task.future.result()
        if read.status != "read" or read.shape is None:
            self._gone(task, read)
            return 0
        self._retry(task)
        if flight.invalid or (read.shape.relation and read.shape.relation in flight.relations):
            logger.info(
                "table topic %r: chunk from %r read again: %s",
                task.topic,
                read.lower,
                flight.invalid or "the table changed shape while it was read",
            )
            return 0
        task.failures = 0
        rows = surviving(read.rows, flight.changed)
        records = self.translator.snapshot_records(
            task.schema,
            task.table,
            read.shape.key,
            (row for _, row in rows),
            flight.attempt,
            last=read.upper is None,
        )
        produced = list(records)
        progress = task.progress.advanced(read.upper, len(rows))
        if task.stale is not None:
            task.stale -= {record.key for record in produced if record.key is not None}
            if progress.done:
                produced += [Record(task.topic, key, None) for key in sorted(task.stale)]
                logger.info(
                    "table topic %r: %d key(s) the table no longer has get tombstones",
                    task.topic,
                    len(task.stale),
                )
        size = self.output.produce(produced)
        if task.stale is None or progress.done:
            self._unacked.append(
                Record(self.state_topic, task.topic.encode("utf-8"), progress.to_json())
            )
        task.progress = progress
        self._load()[task.topic] = progress
        seconds = time.monotonic() - task.started
        if progress.done:
            del self._tasks[task.topic]
            logger.info(
                "table topic %r holds %s.%s: %d row(s) in %d chunk(s), %.1fs",
                task.topic,
                task.schema,
                task.table,
                progress.rows,
                progress.chunks,
                seconds,
            )
        else:
            logger.info(
                "table topic %r: chunk %d of %s.%s, %d row(s) (%d changed meanwhile), "
                "%d row(s) so far, %.1fs",
                task.topic,
                progress.chunks,
                task.schema,
                task.table,
                len(rows),
                len(read.rows) - len(rows),
                progress.rows,
                seconds,
            )
        return size
