"""The writing side of the ROWS encoding: row changes joined into a ``MutationBatch``'s bytes.

``RowsBuilder`` joins pre-encoded bytes exactly as the protobuf runtime would
serialize the message (fields in number order, zero scalars left out), so the
relay never builds a message object per row: ``add`` takes one change
(``EncodedChange``), ``add_run`` a run of changes of one table, operation,
transaction and timestamp (``EncodedRun``) built in one pass. What the bytes
mean, and how they are read back, is ``pgshovel.stream.rows``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat

from pgshovel.stream._codec_wire import (
    clustered_varint,
    length_prefixed,
    signed,
    varint,
    varints,
)

__all__ = ["CHANGE_ALLOWANCE", "EncodedChange", "EncodedRun", "RowsBuilder"]

# MutationBatch fields: tables, changes, provenances, count.
_TABLES, _CHANGES, _PROVENANCES, _COUNT = b"\x0a", b"\x12", b"\x1a", b"\x20"
# RowChange fields.
_ID, _TABLE, _OPERATION, _TRANSACTION = b"\x08", b"\x10", b"\x18", b"\x20"
_TIMESTAMP, _OLD, _NEW, _PROVENANCE = b"\x28", b"\x32", b"\x3a", b"\x40"
_FIRST_PARTITION = (0,)
#: what the framer adds to a change's rows to bound its size before adding it
CHANGE_ALLOWANCE = 64


@dataclass(frozen=True, slots=True)
class EncodedChange:
    """One row change ready for ``RowsBuilder.add``, and the partitions it goes to."""

    table: bytes
    event_id: int
    operation: int
    transaction: int
    timestamp: int
    old: bytes | None
    new: bytes | None
    provenance: bytes | None
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EncodedRun:
    """A run of row changes ready for ``RowsBuilder.add_run``: consecutive events of one
    table shape, operation, transaction and timestamp, all to partition 0. ``olds`` and
    ``news`` hold every change's COPY line (None: no change of the run has that row);
    ``provenances`` every change's serialized ``Provenance`` (None: none has one)."""

    table: bytes
    operation: int
    transaction: int
    timestamp: int
    ids: list[int]
    olds: list[bytes] | None
    news: list[bytes] | None
    provenances: list[bytes] | None

    def changes(self) -> Iterator[EncodedChange]:
        """The run's changes one by one (for a run ``add_run`` does not take whole)."""
        nothing = repeat(None)
        for event_id, old, new, provenance in zip(
            self.ids,
            nothing if self.olds is None else self.olds,
            nothing if self.news is None else self.news,
            nothing if self.provenances is None else self.provenances,
            strict=False,  # ``repeat`` stands for a list the run does not hold
        ):
            yield EncodedChange(
                self.table,
                event_id,
                self.operation,
                self.transaction,
                self.timestamp,
                old,
                new,
                provenance,
                _FIRST_PARTITION,
            )


def _rows_field(tag: bytes, lines: list[bytes]) -> Iterator[bytes]:
    """Each of a run's COPY lines as the field ``tag`` (nothing for an empty line)."""
    return (
        map(b"".join, zip(repeat(tag), varints(list(map(len, lines))), lines))
        if all(lines)
        else (tag + varint(len(line)) + line if line else b"" for line in lines)
    )


@dataclass
class RowsBuilder:
    """Collects one partition's row changes into ``MutationBatch`` payloads.

    ``add`` appends a change of a table (its ``RowTable`` bytes, indexed on first use in
    the message) and takes the provenance's serialized ``Provenance`` (or None);
    ``take`` returns the serialized ``MutationBatch`` of everything added since the last
    ``take`` (None when nothing was) and starts a new one. ``size`` is the payload's
    size so far, for the caller to cut messages at a byte limit.
    """

    size: int = 0
    count: int = 0
    _tables: dict[bytes, int] = field(default_factory=dict)
    _provenances: dict[bytes, int] = field(default_factory=dict)
    _changes: list[bytes] = field(default_factory=list)
    _heads: dict[tuple[int, int], bytes] = field(default_factory=dict)
    _transaction: int = -1
    _transaction_piece: bytes = b""
    _clock: Callable[[int], bytes] = field(default_factory=clustered_varint)

    def add_change(self, change: EncodedChange) -> None:
        """``add`` of an encoded change."""
        self.add(
            change.table,
            change.event_id,
            change.operation,
            change.transaction,
            change.timestamp,
            change.old,
            change.new,
            change.provenance,
        )

    def add(
        self,
        table: bytes,
        event_id: int,
        operation: int,
        transaction: int,
        timestamp: int,
        old: bytes | None,
        new: bytes | None,
        provenance: bytes | None = None,
    ) -> None:
        index = self._tables.get(table)
        if index is None:
            index = self._tables[table] = len(self._tables)
            self.size += len(table) + 4
        # The fields in number order: id, table (0 left out), operation, transaction,
        # timestamp, old, new, provenance; what repeats from change to change is cached.
        head = self._heads.get((index, operation))
        if head is None:
            head = self._heads[(index, operation)] = (
                (_TABLE + varint(index) if index else b"") + _OPERATION + varint(operation)
            )
        if transaction != self._transaction:
            self._transaction = transaction
            self._transaction_piece = _TRANSACTION + varint(transaction) if transaction else b""
        change = b"".join(
            (
                _ID,
                varint(event_id) if event_id >= 0 else signed(event_id),
                head,
                self._transaction_piece,
                _TIMESTAMP + self._clock(timestamp) if timestamp else b"",
                _OLD + varint(len(old)) + old if old else b"",
                _NEW + varint(len(new)) + new if new else b"",
                b"" if provenance is None else _PROVENANCE + varint(self._provenance(provenance)),
            )
        )
        self._changes.append(_CHANGES + varint(len(change)) + change)
        self.size += len(change) + 4
        self.count += 1

    def _provenance(self, provenance: bytes) -> int:
        number = self._provenances.get(provenance)
        if number is None:
            number = self._provenances[provenance] = len(self._provenances) + 1
            self.size += len(provenance) + 4
        return number

    def add_run(self, run: EncodedRun, limit: int) -> bool:
        """Add every change of ``run`` when they all fit in the message below ``limit``
        with room to spare (then ``add`` of each, with the framer's limit checks, would cut
        nothing); else add nothing and return False: the caller adds them one by one.
        The changes' bytes are those ``add`` writes, built for the whole run at once."""
        ids = run.ids
        count = len(ids)
        index = self._tables.get(run.table)
        added = 0
        if index is None:
            index = len(self._tables)
            added = len(run.table) + 4
        operation = run.operation
        head = self._heads.get((index, operation))
        if head is None:
            head = (_TABLE + varint(index) if index else b"") + _OPERATION + varint(operation)
        transaction = run.transaction
        timestamp = run.timestamp
        common = b"".join(
            (
                head,
                _TRANSACTION + varint(transaction) if transaction else b"",
                _TIMESTAMP + self._clock(timestamp) if timestamp else b"",
            )
        )
        numbers: dict[bytes, int] = {}
        pieces: Iterable[bytes]
        if run.provenances is None:
            pieces = repeat(b"")
        else:
            known = self._provenances
            numbered = []
            for provenance in run.provenances:
                number = known.get(provenance) or numbers.get(provenance)
                if number is None:
                    number = numbers[provenance] = len(known) + len(numbers) + 1
                    added += len(provenance) + 4
                numbered.append(_PROVENANCE + varint(number))
            pieces = numbered
        rows = 0
        old_pieces: Iterable[bytes] = repeat(b"")
        new_pieces: Iterable[bytes] = repeat(b"")
        olds, news = run.olds, run.news
        if olds is not None:
            old_pieces = _rows_field(_OLD, olds)
            rows = max(map(len, olds))
        if news is not None:
            new_pieces = _rows_field(_NEW, news)
            rows += max(map(len, news))
        changes = list(
            map(
                b"".join,
                zip(repeat(_ID), varints(ids), repeat(common), old_pieces, new_pieces, pieces),
            )
        )
        lengths = list(map(len, changes))
        size = self.size + added + sum(lengths) + 4 * count
        # ``rows`` bounds every change's rows: no limit check of ``add`` one by one would cut.
        if size + rows + CHANGE_ALLOWANCE > limit:
            return False
        if run.table not in self._tables:
            self._tables[run.table] = index
        self._heads[(index, operation)] = head
        for provenance, number in numbers.items():
            self._provenances[provenance] = number
        self._changes.extend(map(b"".join, zip(repeat(_CHANGES), varints(lengths), changes)))
        self.size = size
        self.count += count
        if transaction != self._transaction:
            self._transaction = transaction
            self._transaction_piece = _TRANSACTION + varint(transaction) if transaction else b""
        return True

    def take(self) -> bytes | None:
        if not self._changes:
            return None
        payload = b"".join(
            [
                *(length_prefixed(_TABLES, table) for table in self._tables),
                *self._changes,
                *(length_prefixed(_PROVENANCES, item) for item in self._provenances),
                _COUNT,
                varint(self.count),
            ]
        )
        self._tables, self._provenances, self._changes, self._heads = {}, {}, [], {}
        self.size = self.count = 0
        return payload
