"""The plain values the worker passes around: table shapes, key ranges, worker state.

They are frozen dataclasses with no I/O so that Spark can pickle them into
tasks and the pure logic (ranges, net effects) can be tested without services.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pgshovel.stream.batches import StreamPosition

Phase = Literal["snapshot", "streaming"]


@dataclass(frozen=True)
class ColumnShape:
    """One replicated column: its name, SQL type (``format_type``) and base type name."""

    name: str
    sql_type: str
    type_name: str
    not_null: bool = False


@dataclass(frozen=True)
class TableShape:
    """A replicated table: its columns in order and its key (empty when unkeyed)."""

    schema: str
    name: str
    columns: tuple[ColumnShape, ...]
    key: tuple[str, ...]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @property
    def key_positions(self) -> tuple[int, ...]:
        names = self.column_names
        return tuple(names.index(key) for key in self.key)


@dataclass(frozen=True)
class KeyRange:
    """Rows of one table whose key is ``>= lower`` and ``< upper`` (None: unbounded)."""

    table: TableShape
    index: int
    lower: tuple[str, ...] | None
    upper: tuple[str, ...] | None


@dataclass(frozen=True)
class WorkerState:
    """What the worker stores with the applied data to resume exactly.

    ``snapshot`` is the loader's ``txid_current_snapshot()`` text, ``start_offset``
    the topic offset noted before it was exported, ``position`` the last applied
    batch (None until the first one).
    """

    phase: Phase
    snapshot: str
    start_offset: int
    position: StreamPosition | None = None

    @property
    def next_offset(self) -> int:
        return self.start_offset if self.position is None else self.position.offset + 1
