"""Which keys the stream changed while a table-topic chunk was read (pure, no I/O).

A chunk of a table is read between a low and a high watermark the relay writes
into the set's queue (``pgshovel.source.read_chunk``). The relay follows its
own watermarks as it frames batches: from the batch holding a chunk's low
watermark through the batch holding its high one, every key of the chunk's
table a mutation touched (old and new key of an update) is collected, and a
TRUNCATE or schema change of the table in that window makes the chunk stale
(it is read again). Whole batches count, as for the worker's incremental
snapshots (``pgshovel.replication.incremental`` explains why that is exact
although a PgQ batch orders events by id, not by commit). Once the high
watermark's batch is published, a chunk row goes out only if its key is not
among the changed ones: the stream already published a newer state of those.

Watermarks of other writers (the replication worker's) match no flight and
are ignored; the relay names its attempts with ``relay_attempt_prefix``, which
no worker attempt (hexadecimal) can start with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from pgshovel.source import Watermarked

__all__ = ["Flight", "WindowTracker", "relay_attempt_prefix", "surviving"]

Identity = tuple[str, str]
T = TypeVar("T")


def relay_attempt_prefix(cluster: str, set_name: str) -> str:
    """What the relay's chunk attempts of a set are named with first (``relay-`` + a hash)."""
    digest = hashlib.sha1(f"relay:{cluster}.{set_name}".encode(), usedforsecurity=False)
    return f"relay-{digest.hexdigest()[:6]}"


@dataclass
class Flight(Watermarked):
    """One chunk attempt being read, and what the stream did to its table meanwhile."""

    attempt: str
    table: Identity
    opened: bool = False
    ready: bool = False
    #: why the chunk must be read again ("" while it is good)
    invalid: str = ""
    #: table-topic keys (bytes) the stream changed in the window
    changed: set[bytes] = field(default_factory=set)
    #: oids of relations a schema change touched in the window (a rename shows the new name)
    relations: set[int] = field(default_factory=set)


@dataclass
class _Batch:
    keys: dict[Identity, set[bytes]] = field(default_factory=dict)
    whole: set[Identity] = field(default_factory=set)
    relations: set[int] = field(default_factory=set)
    marks: set[str] = field(default_factory=set)


class WindowTracker:
    """Follows the batches the relay frames; ``commit`` returns the flights whose window closed.

    Call ``begin`` at a batch's Begin, ``changed``/``whole``/``watermark`` for
    its operations in order, then ``commit`` at its Commit (``rollback`` when the
    batch is abandoned: it is framed again from its Begin).
    """

    def __init__(self) -> None:
        self._flights: dict[str, Flight] = {}
        self._batch = _Batch()

    def open(self, attempt: str, table: Identity) -> Flight:
        """A chunk attempt about to write its low watermark (call before it can)."""
        flight = self._flights[attempt] = Flight(attempt, table)
        return flight

    def drop(self, attempt: str) -> None:
        self._flights.pop(attempt, None)

    def clear(self) -> None:
        """Forget every flight (their watermarks will match nothing)."""
        self._flights.clear()
        self._batch = _Batch()

    @property
    def flights(self) -> Iterator[Flight]:
        return iter(list(self._flights.values()))

    def watches(self, table: Identity) -> bool:
        """Whether the keys of ``table``'s mutations matter now."""
        return any(flight.table == table for flight in self._flights.values())

    def begin(self) -> None:
        self._batch = _Batch()

    def changed(self, table: Identity, keys: Iterable[bytes]) -> None:
        if self.watches(table):
            self._batch.keys.setdefault(table, set()).update(keys)

    def whole(self, table: Identity, relation: int = 0) -> None:
        """A TRUNCATE or schema change of ``table`` (``relation``: its oid, when known)."""
        self._batch.whole.add(table)
        if relation:
            self._batch.relations.add(relation)

    def watermark(self, request: str) -> None:
        self._batch.marks.add(request)

    def rollback(self) -> None:
        self._batch = _Batch()

    def commit(self) -> list[Flight]:
        """Fold the batch into the flights; the ready ones (high watermark seen) leave."""
        batch, self._batch = self._batch, _Batch()
        ready: list[Flight] = []
        for attempt, flight in list(self._flights.items()):
            if flight.low in batch.marks:
                flight.opened = True
            if not flight.opened:
                if flight.high in batch.marks:
                    # Its low watermark went by unseen (another relay led then): read again.
                    flight.invalid = "its low watermark was not seen"
                    flight.ready = True
                    del self._flights[attempt]
                    ready.append(flight)
                continue
            if flight.table in batch.whole and not flight.invalid:
                flight.invalid = "the table was truncated or changed shape while it was read"
            flight.relations |= batch.relations
            flight.changed |= batch.keys.get(flight.table, set())
            if flight.high in batch.marks:
                flight.ready = True
                del self._flights[attempt]
                ready.append(flight)
        return ready


def surviving(rows: Iterable[tuple[bytes, T]], changed: set[bytes]) -> list[tuple[bytes, T]]:
    """The chunk's rows whose key the stream did not change in the window, in order."""
    return [(key, row) for key, row in rows if key not in changed]
