"""How far a table topic's snapshot got: the records of ``__pgshovel-snapshots.<cluster>.<set>``.

The topic is compacted and keyed by the table topic's name; the last record
of a key wins. Its value is JSON:

* ``{"schema", "table", "status": "running", "next": [<key text>...], "rows", "chunks"}``:
  the chunks up to (not including) key ``next`` are published; a relay that
  starts again goes on from there;
* ``{"schema", "table", "status": "done", "rows", "chunks"}``: the topic holds
  the whole table;
* ``{"schema", "table", "snapshot": "<txid snapshot>", "rows"}`` (written by
  relays before chunked snapshots): done, in one snapshot; changes of
  transactions that snapshot saw are still left out.

A record is produced only after everything it vouches for is acknowledged.
Pure: parsing and building only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pgshovel.errors import StreamError
from pgshovel.stream.handoff import Snapshot, parse_txid_snapshot
from pgshovel.stream.typed_json import dumps

__all__ = ["Progress", "parse_progress"]

Bound = tuple[str, ...]


@dataclass(frozen=True)
class Progress:
    """One table topic's snapshot progress."""

    schema: str
    table: str
    done: bool = False
    #: the first key not yet published (None: from the start, or done)
    next: Bound | None = None
    rows: int = 0
    chunks: int = 0
    #: the single snapshot of a relay before chunked snapshots (its changes are skipped)
    legacy: Snapshot | None = None

    def advanced(self, upper: Bound | None, rows: int) -> Progress:
        """After one more chunk, the range below ``upper`` (None: the end of the table)."""
        return Progress(
            self.schema,
            self.table,
            done=upper is None,
            next=upper,
            rows=self.rows + rows,
            chunks=self.chunks + 1,
        )

    def to_json(self) -> bytes:
        value: dict[str, Any] = {
            "schema": self.schema,
            "table": self.table,
            "status": "done" if self.done else "running",
            "rows": self.rows,
            "chunks": self.chunks,
        }
        if not self.done:
            value["next"] = None if self.next is None else list(self.next)
        return dumps(value).encode("utf-8")


def parse_progress(topic: str, value: bytes) -> Progress:
    """A record of the snapshots topic; a malformed one is a ``StreamError`` naming it."""
    try:
        document = json.loads(value)
        schema, table = str(document["schema"]), str(document["table"])
        if "snapshot" in document and "status" not in document:
            legacy = parse_txid_snapshot(str(document["snapshot"]))
            return Progress(schema, table, done=True, rows=int(document["rows"]), legacy=legacy)
        status = document["status"]
        if status not in ("running", "done"):
            raise ValueError(f"status {status!r}")
        after = document.get("next")
        bound = None if after is None else tuple(str(part) for part in after)
        return Progress(
            schema,
            table,
            done=status == "done",
            next=None if status == "done" else bound,
            rows=int(document["rows"]),
            chunks=int(document.get("chunks", 0)),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise StreamError(
            f"the snapshot record of table topic {topic!r} is malformed ({error}): "
            f"{value[:200]!r}; delete it (a tombstone for that key) to take the snapshot again"
        ) from error
