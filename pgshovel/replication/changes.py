"""Reduce an ordered list of changes to one table to its net effect per key.

The last change per key wins; an UPDATE that changes the key deletes the old
key and writes the new one; a TRUNCATE forgets everything before it and must be
applied itself, before the remaining net rows. ``reduce_keyed`` works on keys
and an opaque row per change (a target reads a row's values only if it is the
last one of its key); ``reduce_changes`` is the same on ``Change`` values. Pure:
no I/O, unit-tested against a dict model.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pgshovel.errors import ProgrammingError, StreamError

Text = str | None
Row = tuple[Text, ...]
Key = tuple[Text, ...]
R = TypeVar("R")


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
class NetEffect(Generic[R]):
    """What to do to a keyed table: truncate first, then for each key a row or None (delete)."""

    truncate: bool = False
    rows: dict[Key, R | None] = field(default_factory=dict)

    @property
    def upserts(self) -> list[R]:
        return [row for row in self.rows.values() if row is not None]


#: One change as keys: (TRUNCATE?, key it deletes or None, key it writes or None, its row).
KeyedChange = tuple[bool, Key | None, Key | None, R | None]


def key_of(row: Row, key_positions: Sequence[int]) -> Key:
    return tuple(row[position] for position in key_positions)


def reduce_keyed(changes: Iterable[KeyedChange[R]]) -> NetEffect[R]:
    """Fold keyed changes (in stream order) into their net effect.

    A change deletes its old key (UPDATE, DELETE), then writes its row under its
    new key (INSERT, UPDATE); an UPDATE that keeps its key only writes.
    """
    effect: NetEffect[R] = NetEffect()
    rows = effect.rows
    pop = rows.pop
    for truncate, old_key, new_key, row in changes:
        if truncate:
            effect.truncate = True
            rows.clear()
            continue
        if old_key is not None:
            pop(old_key, None)
            rows[old_key] = None
        if new_key is not None:
            # Re-insert at the end so the dict's order stays the order of last change.
            pop(new_key, None)
            rows[new_key] = row
    return effect


def _keyed(changes: Iterable[Change], key_positions: Sequence[int]) -> Iterable[KeyedChange[Row]]:
    for change in changes:
        operation = change.operation
        if operation is Operation.TRUNCATE:
            yield True, None, None, None
            continue
        old = change.old if operation is not Operation.INSERT else None
        new = change.new if operation is not Operation.DELETE else None
        yield (
            False,
            None if old is None else key_of(old, key_positions),
            None if new is None else key_of(new, key_positions),
            new,
        )


def reduce_changes(changes: Iterable[Change], key_positions: Sequence[int]) -> NetEffect[Row]:
    """Fold ``changes`` (in stream order) into their net effect on a keyed table."""
    if not key_positions:
        raise ProgrammingError("cannot reduce changes of an unkeyed table; apply them in order")
    return reduce_keyed(_keyed(changes, key_positions))
