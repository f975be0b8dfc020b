"""Reduce an ordered list of changes to one table to its net effect per key.

The last change per key wins; an UPDATE that changes the key deletes the old
key and writes the new one; a TRUNCATE forgets everything before it and must be
applied itself, before the remaining net rows. Pure: no I/O, unit-tested
against a dict model.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pgshovel.errors import ProgrammingError, StreamError

Text = str | None
Row = tuple[Text, ...]
Key = tuple[Text, ...]


class Operation(enum.Enum):
    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    TRUNCATE = "TRUNCATE"


@dataclass(frozen=True)
class Change:
    """One mutation in text form: rows are column values in the table's column order."""

    operation: Operation
    old: Row | None = None
    new: Row | None = None

    def __post_init__(self) -> None:
        needs_old = self.operation in (Operation.UPDATE, Operation.DELETE)
        needs_new = self.operation in (Operation.INSERT, Operation.UPDATE)
        if needs_old and self.old is None:
            raise StreamError(f"{self.operation.value} change has no old row; cannot apply")
        if needs_new and self.new is None:
            raise StreamError(f"{self.operation.value} change has no new row; cannot apply")


@dataclass
class NetEffect:
    """What to do to a keyed table: truncate first, then for each key a row or None (delete)."""

    truncate: bool = False
    rows: dict[Key, Row | None] = field(default_factory=dict)

    @property
    def upserts(self) -> list[Row]:
        return [row for row in self.rows.values() if row is not None]


def key_of(row: Row, key_positions: Sequence[int]) -> Key:
    return tuple(row[position] for position in key_positions)


def reduce_changes(changes: Iterable[Change], key_positions: Sequence[int]) -> NetEffect:
    """Fold ``changes`` (in stream order) into their net effect on a keyed table."""
    if not key_positions:
        raise ProgrammingError("cannot reduce changes of an unkeyed table; apply them in order")
    effect = NetEffect()
    for change in changes:
        if change.operation is Operation.TRUNCATE:
            effect.truncate = True
            effect.rows.clear()
            continue
        if change.old is not None and change.operation is not Operation.INSERT:
            old_key = key_of(change.old, key_positions)
            effect.rows.pop(old_key, None)
            effect.rows[old_key] = None
        if change.new is not None and change.operation is not Operation.DELETE:
            new_key = key_of(change.new, key_positions)
            # Re-insert at the end so the dict's order stays the order of last change.
            effect.rows.pop(new_key, None)
            effect.rows[new_key] = change.new
    return effect
