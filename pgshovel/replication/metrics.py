"""The worker's figures, and the Prometheus series made of them (``pgshovel_worker_*``).

Apply lag is the age of the oldest source change read from the stream but not
yet committed to the target, in seconds: set when a micro-batch is read (its
first batch's oldest change: the later of the batch's start tick, after which
it committed, and its event time), kept through failures and retries (so it
grows while the target is unreachable), and cleared when the target committed
it; an idle stream (nothing to read) means 0, and so does a micro-batch without
mutations (its batches' start ticks may be PgQ's idle ticks, a minute old).
``batch_lag_seconds`` is that age at the moment of the last commit: source
commit to target commit.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pgshovel.metrics import Delivery, Readiness, Series
from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch, RowMutations
from pgshovel.stream.partitions import JoinedMutations
from pgshovel.stream.state import WorkerState


def oldest_change_seconds(batches: Sequence[CommittedBatch]) -> float | None:
    """A lower bound of when the oldest change of ``batches`` committed (epoch seconds); None
    when they hold no mutation (an empty batch's start tick may be a minute old: PgQ's idle
    ticks, and nothing of it waits for the target)."""
    for batch in batches:
        if batch.mutations:
            start = batch.begin.start.timestamp / 1e6
            return max(start, _first_timestamp(batch.mutations) / 1e6)
    return None


def _first_timestamp(mutations: Sequence[stream_pb2.Mutation]) -> int:
    """The first mutation's timestamp, read from the ROWS messages when the batch has them
    (the staged path never decodes a batch's values on the driver)."""
    if isinstance(mutations, JoinedMutations):
        return min(_first_timestamp(part) for part in mutations.parts if len(part))
    if isinstance(mutations, RowMutations):
        return int(mutations.messages[0].rows.changes[0].timestamp)
    return int(mutations[0].timestamp)


def table_counts(mutations: Sequence[stream_pb2.Mutation]) -> Counter[tuple[str, str]]:
    """Mutations per (schema, table), counted from the ROWS messages when the batch has them
    (no values decoded; a key change written to two partitions counted once)."""
    if isinstance(mutations, JoinedMutations):
        counts: Counter[tuple[str, str]] = Counter()
        seen: set[int] = set()
        for part in mutations.parts:
            if not isinstance(part, RowMutations):
                counts.update(table_counts(part))
                continue
            for message in part.messages:
                tables = message.rows.tables
                for change in message.rows.changes:
                    if change.id not in seen:
                        seen.add(change.id)
                        shape = tables[change.table].shape
                        counts[(shape.schema, shape.name)] += 1
        return counts
    if isinstance(mutations, RowMutations):
        counts = Counter()
        for message in mutations.messages:
            tables = message.rows.tables
            if len(tables) == 1:  # the usual message: its count, no change visited
                shape = tables[0].shape
                counts[(shape.schema, shape.name)] += message.rows.count
                continue
            for change in message.rows.changes:
                shape = tables[change.table].shape
                counts[(shape.schema, shape.name)] += 1
        return counts
    return Counter((mutation.schema, mutation.table) for mutation in mutations)


@dataclass(frozen=True)
class Applying:
    """The micro-batch the worker is applying (read, not yet committed to the target)."""

    #: the id of its first source batch
    batch_id: int
    batches: int
    mutations: int
    #: when it was read (epoch seconds)
    since: float


@dataclass
class WorkerMetrics(Delivery):
    """Counters and gauges; updated by the worker loop, read by the HTTP thread."""

    micro_batches: int = 0
    batches: int = 0
    mutations: int = 0
    rows: int = 0
    #: the position of the last batch applied as one number: the messages before it, less
    #: one (with the set topic's one partition, the offset of its Commit; -1 before the first)
    offset: int = -1
    #: messages between the stream's end and the position, as the stream last saw it
    lag_messages: int = 0
    streaming: bool = False
    #: the state last stored (its tasks give the snapshot progress)
    state: WorkerState | None = None
    #: what is being applied now (None between micro-batches)
    applying: Applying | None = None
    #: mutations applied per (schema, table), and those read but not committed yet
    tables: Counter[tuple[str, str]] = field(default_factory=Counter)
    reading: Counter[tuple[str, str]] = field(default_factory=Counter)

    def read(self, batches: Sequence[CommittedBatch]) -> None:
        """A micro-batch was read; a retry of the same changes keeps the older times."""
        oldest = oldest_change_seconds(batches)
        if oldest is not None and (self.pending_since is None or oldest < self.pending_since):
            self.pending_since = oldest
        for batch in batches:
            self.reading.update(table_counts(batch.mutations))
        if batches:
            first = batches[0].batch_id
            again = self.applying is not None and self.applying.batch_id == first
            self.applying = Applying(
                first,
                len(batches),
                sum(len(batch.mutations) for batch in batches),
                self.applying.since if again and self.applying is not None else time.time(),
            )

    def applied(self, batches: int, mutations: int, rows: int, state: WorkerState) -> float:
        """The target committed a micro-batch; returns its lag (source to target commit)."""
        self.micro_batches += 1
        self.batches += batches
        self.mutations += mutations
        self.rows += rows
        self.state = state
        self.applying = None
        self.tables.update(self.reading)
        self.reading.clear()
        if state.position.consumed:
            self.offset = state.position.messages - 1
        if self.pending_since is None:
            return 0.0  # no mutation: the last micro-batch's lag stays
        return self.delivered()

    def discarded(self) -> None:
        """What was read is not applied (a failure, a batch whose parts are abandoned): it
        will be read again."""
        self.applying = None
        self.reading.clear()

    def readiness(self) -> Readiness:
        """Ready while streaming, with the last step through (see ``step_readiness``)."""
        if not self.streaming:
            return False, "not streaming (loading the snapshot, or starting)"
        return self.step_readiness(True, self.applying is not None)

    def idle(self, state: WorkerState, lag_messages: int) -> None:
        """Nothing to read: everything the stream held is applied."""
        self.pending_since = None
        self.applying = None
        self.lag_messages = lag_messages
        self.state = state

    def series(self) -> list[Series]:
        return [
            Series("micro_batches_total", "counter", "Micro-batches applied.", self._micro),
            Series("batches_total", "counter", "Source batches applied.", self._batches),
            Series("mutations_total", "counter", "Mutations applied.", self._mutations),
            Series(
                "table_mutations_total",
                "counter",
                "Mutations applied, per table.",
                self._tables,
                ("schema", "table"),
            ),
            Series(
                "backlog_messages",
                "gauge",
                "Messages between the worker's position and the stream's end, as last read.",
                self._lag_messages,
            ),
            Series("rows_total", "counter", "Target rows written.", self._rows),
            *self.delivery_series(
                "apply_lag_seconds",
                "Age of the oldest source change read but not yet committed to the target.",
                "Source commit to target commit of the last applied micro-batch.",
            ),
            Series("offset", "gauge", "Stream offset of the last applied message.", self._offset),
            Series(
                "lag_messages",
                "gauge",
                "The same as backlog_messages (kept for existing dashboards).",
                self._lag_messages,
            ),
            Series("streaming", "gauge", "1 once the snapshot is loaded.", self._streaming),
            Series(
                "snapshot_rows",
                "gauge",
                "Rows copied (or compared) so far by each incremental snapshot task.",
                self._snapshot_rows,
                ("table", "purpose"),
            ),
            Series(
                "snapshot_rows_estimated",
                "gauge",
                "The planner's estimate of each incremental snapshot task's rows.",
                self._snapshot_estimates,
                ("table", "purpose"),
            ),
            Series(
                "snapshot_ranges_remaining",
                "gauge",
                "Key ranges each incremental snapshot task has still to do.",
                self._snapshot_ranges,
                ("table", "purpose"),
            ),
        ]

    def _micro(self) -> float:
        return self.micro_batches

    def _batches(self) -> float:
        return self.batches

    def _mutations(self) -> float:
        return self.mutations

    def _rows(self) -> float:
        return self.rows

    def _tables(self) -> list[tuple[tuple[str, ...], float]]:
        return [(key, float(count)) for key, count in sorted(self.tables.items())]

    def _offset(self) -> float:
        return self.offset

    def _lag_messages(self) -> float:
        return self.lag_messages

    def _streaming(self) -> float:
        return int(self.streaming)

    def _tasks(self, value: str) -> list[tuple[tuple[str, ...], float]]:
        state = self.state
        if state is None:
            return []
        totals: dict[tuple[str, ...], float] = {}
        for task in state.tasks:
            labels = (f"{task.schema}.{task.table}", str(task.purpose))
            if value == "rows":
                number = float(task.rows)
            elif value == "estimate":
                number = float(task.estimate)
            else:
                number = float(len(task.ranges) - len(task.done))
            totals[labels] = totals.get(labels, 0.0) + number
        return list(totals.items())

    def _snapshot_rows(self) -> list[tuple[tuple[str, ...], float]]:
        return self._tasks("rows")

    def _snapshot_estimates(self) -> list[tuple[tuple[str, ...], float]]:
        return self._tasks("estimate")

    def _snapshot_ranges(self) -> list[tuple[tuple[str, ...], float]]:
        return self._tasks("ranges")
