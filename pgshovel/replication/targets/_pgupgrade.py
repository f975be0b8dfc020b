"""Upgrade a PostgreSQL target's state table in place: the columns of 0.1 and 0.2 become a document.

pgshovel 0.1 stored the worker state of a set in nine columns of
``pgshovel_replication.worker_state`` (phase, snapshot, start offset, the last
consumed message's offset, publisher, sequence and epoch, the committed batches
as two arrays), 0.2 added ``tables``, ``broken``, ``tasks`` and ``horizon``.
Now the row holds one ``state`` document (``WorkerState.to_document``). The
first worker to open such a table converts every row (of every set) in the
transaction that opens the target, under the lock that serializes workers
creating the state schema: all rows or none are converted, and a worker killed
midway leaves the table as it was. A row's values are carried over as they are,
in the document form of 0.2 (``from_document`` reads it); a row someone edited
into something that does not read fails when its own worker reads it, naming
the field, and never stops the conversion of the others.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

logger = logging.getLogger(__name__)

#: The columns the state of a set had before it was one document (0.1, and 0.2's additions).
OLD_COLUMNS = (
    "phase",
    "snapshot",
    "start_offset",
    "position_offset",
    "publisher",
    "sequence",
    "epoch",
    "committed_nodes",
    "committed_batches",
    "tables",
    "broken",
    "tasks",
    "horizon",
)


def _hex(value: Any) -> Any:
    """bytea as ``to_jsonb`` shows it (``"\\x0a1b"``) as plain hexadecimal text."""
    if isinstance(value, str) and value.startswith("\\x"):
        return value[2:]
    return value


def legacy_document(row: dict[str, Any]) -> dict[str, Any]:
    """The state document (0.2's form) of one row of an old state table, given as
    ``to_jsonb(row)``; values are carried over as they are (none is checked here)."""
    position = None
    if row.get("position_offset") is not None:
        nodes = row.get("committed_nodes")
        position = {
            "offset": row["position_offset"],
            "publisher": _hex(row.get("publisher")),
            "sequence": row.get("sequence"),
            "epoch": row.get("epoch"),
            "committed_nodes": [_hex(node) for node in nodes] if isinstance(nodes, list) else nodes,
            "committed_batches": row.get("committed_batches"),
        }
    document = {
        "phase": row.get("phase"),
        "snapshot": row.get("snapshot"),
        "start_offset": row.get("start_offset"),
        "position": position,
    }
    # 0.1 had none of these: the reader's defaults apply.
    for name in ("tables", "broken", "tasks", "horizon"):
        if name in row:
            document[name] = row[name]
    return document


def columns(cursor: Cursor, table: sql.Identifier, qualified: str) -> set[str]:
    """The columns ``table`` has (``qualified`` is its name as text)."""
    cursor.execute(
        "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass "
        "AND attnum > 0 AND NOT attisdropped",
        (qualified,),
    )
    return {str(name) for (name,) in cursor.fetchall()}


def upgrade(cursor: Cursor, table: sql.Identifier, present: set[str]) -> int:
    """Convert the old state table ``table`` (with the old columns ``present``) to one
    ``state`` document per row, in the caller's transaction; returns the rows converted."""
    cursor.execute(
        sql.SQL("SELECT cluster, set_name, to_jsonb(s) FROM {} s").format(table),
    )
    rows = cursor.fetchall()
    cursor.execute(sql.SQL("ALTER TABLE {} ADD COLUMN state jsonb").format(table))
    for cluster, set_name, row in rows:
        cursor.execute(
            sql.SQL("UPDATE {} SET state = %s::jsonb WHERE cluster = %s AND set_name = %s").format(
                table
            ),
            (json.dumps(legacy_document(row)), cluster, set_name),
        )
    old = [name for name in OLD_COLUMNS if name in present]
    cursor.execute(
        sql.SQL("ALTER TABLE {} ALTER COLUMN state SET NOT NULL, {}").format(
            table,
            sql.SQL(", ").join(
                sql.SQL("DROP COLUMN {}").format(sql.Identifier(name)) for name in old
            ),
        )
    )
    logger.info(
        "upgraded the worker state table: %d set(s) now stored as one document each", len(rows)
    )
    return len(rows)
