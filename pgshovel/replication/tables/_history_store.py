"""The tables library's contract for where a table format keeps SCD type 2 histories.

``HistoryStore`` is what the targets' history code (``targets._tablefmt_history``)
asks of a format's store — ``_history.DeltaHistory`` and
``_iceberg_history.IcebergHistory`` implement it — so the history rules are
written once for both formats. It lives with the library rather than in
``pgshovel.abc``: its types (``NetEffect``, ``CommitRecord``, ``CommitResult``)
are the library's own, and the contracts module imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa

    from pgshovel.replication.tables._delta import CommitResult
    from pgshovel.replication.tables._effect import CommitRecord, NetEffect
    from pgshovel.source import TableShape

__all__ = ["HistoryStore"]


@runtime_checkable
class HistoryStore(Protocol):
    """Where a table format keeps the SCD type 2 histories ``<table>~history`` of a set's
    copies (``tables._versions`` says which versions a change closes and opens)."""

    def where(self, shape: TableShape) -> str:
        """The history's name or path, for messages."""
        ...

    def removal(self, shape: TableShape) -> str:
        """How a user removes the history (a runnable remedy)."""
        ...

    def exists(self, shape: TableShape) -> bool: ...

    def create(self, shape: TableShape) -> None:
        """Create the empty history unless it exists."""
        ...

    def counter(self, shape: TableShape) -> int | None:
        """The micro-batch the history holds last (None: none yet)."""
        ...

    def columns(self, shape: TableShape) -> list[str]:
        """The history's column names as stored."""
        ...

    def add_columns(self, shape: TableShape, fields: Sequence[pa.Field]) -> None: ...

    def current(self, shape: TableShape) -> pa.Table:
        """The current versions (end transaction null)."""
        ...

    def versions(self, shape: TableShape) -> pa.Table:
        """Every version."""
        ...

    def commit(self, effect: NetEffect, record: CommitRecord) -> CommitResult:
        """Close and open the versions of ``effect`` in one commit carrying ``record`` (skipped
        when the history holds its counter)."""
        ...

    def commit_load(self, shape: TableShape, versions: pa.Table, record: CommitRecord) -> None:
        """Replace every version by ``versions`` in one commit marked as a load's."""
        ...

    def undo_load(self, shape: TableShape) -> bool:
        """Take back the last commit if a load made it (a load that stopped); whether it did."""
        ...

    def rename(self, before: TableShape, after: TableShape) -> None: ...

    def drop(self, shape: TableShape) -> None:
        """Remove the history and its files."""
        ...
