"""Exactly once across several tables without multi-table transactions: the intent log.

Neither Delta Lake nor Iceberg commits two tables atomically, so a micro-batch
that touches several tables is committed like this (``commit_micro_batch``):

1. Write the micro-batch's *intent* — its counter (one more than the last),
   the stream positions before and after it (which offsets it reads, cut at
   batch boundaries), the source horizon, the batch ids and the tables it
   touches in commit order — as ``<counter>.json`` in the intent directory,
   durably (temporary file, fsync, rename, fsync of the directory), before
   any table commit.
2. Commit each table in that order, each commit carrying the same counter
   (Delta application transaction, Iceberg property) and the position after.
3. Only then may the next micro-batch's intent be written.

So at any moment at most one micro-batch is partly committed — the latest
intent's — and every table holds either that micro-batch or the one before
(for the tables it touches) or something older that it did not touch. On
start (``plan_recovery``) the worker reads the latest intent and each table's
counter: the tables of that intent behind its counter get the micro-batch
again — read from Kafka between the intent's two positions, so it is the same
micro-batch, and its net effect per key is idempotent besides — and the stream
resumes from the intent's end position. A table commit skips a micro-batch its
table already holds, so the tables that committed are not written twice.
Files a crash left between writing data and committing are referenced by no
commit: readers never see them, and Delta's vacuum or the Iceberg orphan
cleanup (``_maintenance``) removes them. Readers of several tables may see one
table a micro-batch ahead of another while a micro-batch commits; each table on
its own only ever moves from one whole micro-batch to the next.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pgshovel.errors import ProgrammingError, RecoveryNeeded
from pgshovel.replication.tables._delta import CommitResult
from pgshovel.replication.tables._effect import CommitRecord, NetEffect
from pgshovel.source import TableShape

__all__ = [
    "Intent",
    "IntentLog",
    "Recovery",
    "TableFormat",
    "commit_micro_batch",
    "plan_recovery",
    "recover",
]

logger = logging.getLogger(__name__)

Identity = tuple[str, str]


class TableFormat(Protocol):
    """What ``DeltaTables`` and ``IcebergTables`` offer the commit path (to move to
    ``pgshovel.abc`` with the worker's targets)."""

    def counter(self, shape: TableShape) -> int | None: ...

    def commit(self, effect: NetEffect, record: CommitRecord) -> CommitResult: ...


@dataclass(frozen=True)
class Intent:
    """A micro-batch as written down before its first table commit (see the module docstring)."""

    counter: int
    start: str
    end: str
    horizon: str
    tables: tuple[Identity, ...]
    batches: tuple[int, ...] = ()

    @property
    def record(self) -> CommitRecord:
        """What each of its table commits carries."""
        return CommitRecord(self.counter, self.end, self.horizon, self.batches)

    def to_document(self) -> dict[str, object]:
        return {
            "counter": self.counter,
            "start": json.loads(self.start),
            "end": json.loads(self.end),
            "horizon": self.horizon,
            "tables": [list(identity) for identity in self.tables],
            "batches": list(self.batches),
        }

    @classmethod
    def from_document(cls, document: Mapping[str, object]) -> Intent:
        tables, batches = document["tables"], document.get("batches") or []
        if not isinstance(tables, list) or not isinstance(batches, list):
            raise ProgrammingError(f"not an intent document: {document!r}")
        return cls(
            counter=int(str(document["counter"])),
            start=json.dumps(document["start"], sort_keys=True),
            end=json.dumps(document["end"], sort_keys=True),
            horizon=str(document["horizon"]),
            tables=tuple((str(schema), str(name)) for schema, name in tables),
            batches=tuple(int(batch) for batch in batches),
        )


class IntentLog:
    """Intent documents ``<counter, 20 digits>.json`` in one directory of a filesystem."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        #: the document this log wrote last, so writing the same intent again reads no file
        self._written: dict[str, object] | None = None

    def _path(self, counter: int) -> Path:
        return self.directory / f"{counter:020d}.json"

    def counters(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(
            int(path.stem)
            for path in self.directory.glob("*.json")
            if path.stem.isdigit() and len(path.stem) == 20
        )

    def _document(self, counter: int) -> dict[str, object] | None:
        path = self._path(counter)
        if not path.exists():
            return None
        document: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
        return document

    def read(self, counter: int) -> Intent | None:
        document = self._document(counter)
        return None if document is None else Intent.from_document(document)

    def attachment(self, counter: int) -> dict[str, object] | None:
        """What the caller wrote with intent ``counter`` (None: nothing, or no such intent)."""
        document = self._document(counter)
        attached = None if document is None else document.get("attachment")
        return attached if isinstance(attached, dict) else None

    def latest(self) -> Intent | None:
        counters = self.counters()
        return self.read(counters[-1]) if counters else None

    def write(self, intent: Intent, attachment: Mapping[str, object] | None = None) -> None:
        """Write ``intent`` durably; writing the same intent again is a no-op.

        ``attachment`` (a JSON document) is stored in the same file and read back with
        ``attachment(counter)``: what the caller needs to complete the micro-batch after a
        crash (the Delta and Iceberg targets: its net effects and worker state) becomes
        durable in the same write as the intent, not in one of its own before it."""
        written = self._written
        if (
            written is not None
            and written["counter"] == intent.counter
            and self._path(intent.counter).exists()
        ):
            existing: Intent | None = Intent.from_document(written)
        else:
            existing = self.read(intent.counter)
        if existing is not None:
            if existing.to_document() != intent.to_document():
                raise ProgrammingError(
                    f"micro-batch {intent.counter!r} was recorded in {self.directory} as "
                    f"{existing.to_document()!r}, not {intent.to_document()!r}; a micro-batch is "
                    "re-applied exactly as it was recorded"
                )
            return
        latest = self.counters()
        if latest and intent.counter != latest[-1] + 1:
            raise ProgrammingError(
                f"micro-batch {intent.counter!r} does not follow the last recorded one "
                f"({latest[-1]!r}) in {self.directory}"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(intent.counter)
        temporary = path.with_name(f".{path.name}.tmp")
        document = intent.to_document()
        with temporary.open("w", encoding="utf-8") as file:
            if attachment is None:
                json.dump(document, file, indent=1, sort_keys=True)
            else:
                json.dump({**document, "attachment": attachment}, file, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        handle = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
        self._written = document

    def prune(self, keep: int = 1) -> None:
        """Remove all but the ``keep`` latest intents (they are done)."""
        for counter in self.counters()[:-keep]:
            self._path(counter).unlink(missing_ok=True)


def commit_micro_batch(
    tables: TableFormat,
    log: IntentLog,
    intent: Intent,
    effects: Mapping[Identity, NetEffect],
) -> list[CommitResult]:
    """Write the intent, then commit each of its tables in order (see the module docstring)."""
    missing = [identity for identity in intent.tables if identity not in effects]
    extra = [identity for identity in effects if identity not in intent.tables]
    if missing or extra:
        raise ProgrammingError(
            f"micro-batch {intent.counter!r} lists tables {list(intent.tables)!r} but has net "
            f"effects for {list(effects)!r}"
        )
    log.write(intent)
    record = intent.record
    results = [tables.commit(effects[identity], record) for identity in intent.tables]
    log.prune()
    return results


@dataclass(frozen=True)
class Recovery:
    """Where a restarted worker stands: re-apply ``reapply`` to ``behind``, then resume at
    ``position`` (None: nothing was ever committed)."""

    position: str | None
    reapply: Intent | None = None
    behind: tuple[Identity, ...] = ()


def plan_recovery(latest: Intent | None, counters: Mapping[Identity, int | None]) -> Recovery:
    """The recovery from the latest intent and each table's counter (pure)."""
    ceiling = latest.counter if latest is not None else 0
    ahead = {
        identity: counter
        for identity, counter in counters.items()
        if counter is not None and counter > ceiling
    }
    if ahead:
        raise RecoveryNeeded(
            f"tables {sorted(ahead)!r} hold micro-batches {sorted(set(ahead.values()))!r}, after "
            f"the last intent recorded ({ceiling!r}): the intent directory was removed or belongs "
            "to another target; point the worker at this target's own intent directory, or "
            "copy those tables again with 'pgshovel-admin set resnapshot SET TABLE'"
        )
    if latest is None:
        return Recovery(None)
    behind = tuple(
        identity for identity in latest.tables if (counters.get(identity) or 0) < latest.counter
    )
    if not behind:
        return Recovery(latest.end)
    logger.warning(
        "micro-batch %d stopped after %d of its %d tables; re-applying it to %s",
        latest.counter,
        len(latest.tables) - len(behind),
        len(latest.tables),
        ", ".join(".".join(identity) for identity in behind),
    )
    return Recovery(latest.end, latest, behind)


def recover(tables: TableFormat, log: IntentLog, shapes: Sequence[TableShape]) -> Recovery:
    """``plan_recovery`` from the intent log and the counters ``tables`` hold for ``shapes``."""
    counters = {shape.identity: tables.counter(shape) for shape in shapes}
    return plan_recovery(log.latest(), counters)
