"""The worker's component contracts: Loader, Stream and Target (``typing.Protocol``).

replication.yml names one of each as ``path: module:Name`` plus
``configuration:``; ``pgshovel.components.build`` checks them on load. The
order of durable effects is fixed by the worker (see ``worker``): the target's
data and the worker's state are always written in one step, the Kafka
position is never committed anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol, runtime_checkable

from pgshovel.replication.model import TableShape, WorkerState
from pgshovel.stream.batches import CommittedBatch

#: Writes the COPY text of one key range (the loader's read) to the file it is given.
CopyOut = Callable[[IO[bytes]], None]


@runtime_checkable
class SnapshotSink(Protocol):
    """Where Spark tasks write snapshot ranges; must pickle (it travels into tasks)."""

    def load_range(self, table: TableShape, index: int, copy_out: CopyOut) -> int:
        """Store one range's rows (COPY text from ``copy_out``); return how many."""
        ...


@dataclass(frozen=True)
class TableLoadReport:
    """What the loader did for one table."""

    table: str
    rows: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float(self.rows)


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


@dataclass(frozen=True)
class MicroBatch:
    """Whole committed batches read from the stream, in order."""

    batches: tuple[CommittedBatch, ...]
    messages: int
    #: messages between the last one read and the topic's end when it was read
    lag: int


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

    def close(self) -> None: ...


@runtime_checkable
class Target(Protocol):
    """Where the replicated tables and the worker's state live."""

    def open(self, cluster: str, set_name: str, tables: Sequence[TableShape]) -> WorkerState | None:
        """Connect, create what is missing, return the stored state (None: never loaded)."""
        ...

    def begin_snapshot(self, state: WorkerState) -> None:
        """Empty the set's tables and record that a snapshot load is under way."""
        ...

    def snapshot_sink(self) -> SnapshotSink: ...

    def finish_snapshot(self, state: WorkerState) -> None:
        """Record that the snapshot is complete; streaming resumes from ``state``."""
        ...

    def apply(self, batches: Sequence[CommittedBatch], state: WorkerState) -> int:
        """Apply the batches and store ``state`` atomically; return the rows written."""
        ...

    def close(self) -> None: ...
