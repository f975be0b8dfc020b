"""Debezium's change-event envelope, built from pgshovel's mutations (``format: debezium``).

The value of a table-topic message in this format is the ``payload`` part of a
Debezium PostgreSQL connector's event as its JSON converter writes it with
``schemas.enable=false``::

    {"before": {...} | null, "after": {...} | null,
     "source": {"version", "connector": "pgshovel", "name", "ts_ms", "snapshot",
                "db", "sequence", "schema", "table", "txId", "lsn", "xmin"},
     "op": "c" | "u" | "d" | "r", "ts_ms",
     "transaction": {"id", "total_order", "data_collection_order"} | null}

Rows use the typed JSON mapping (``pgshovel.stream.typed_json``). pgshovel has
no WAL position: ``lsn`` and ``xmin`` are null, and ``sequence`` (a string
holding a JSON array of two strings, as Debezium's) carries the position in
the set's stream, ``["<pgq batch id>", "<pgq event id>"]``; snapshot reads
carry ``["snapshot", "<txid snapshot>"]``. ``source.ts_ms`` is when the row
changed (the capture trigger's clock), the outer ``ts_ms`` when the relay
built the event. Truncate events (``op: t``, no rows) are only printed by ``set
tail --format debezium``: a table topic gets a deletion per live key instead
(see ``pgshovel.relay.table_topics``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pgshovel

__all__ = ["CONNECTOR", "Position", "Transaction", "envelope"]

CONNECTOR = "pgshovel"

Operation = Literal["c", "u", "d", "r", "t"]
SnapshotMark = Literal["true", "last", "false"]


@dataclass(frozen=True)
class Position:
    """Where an event comes from: its table, transaction and place in the stream."""

    schema: str
    table: str
    #: the txid (None for a snapshot read)
    transaction: int | None
    #: microseconds since the Unix epoch when the row changed
    changed_micros: int
    #: the two strings of ``source.sequence``
    sequence: tuple[str, str]
    snapshot: SnapshotMark = "false"


@dataclass(frozen=True)
class Transaction:
    """Debezium's ``transaction`` block: the event's rank in its transaction and table."""

    id: str
    total_order: int
    data_collection_order: int


def _sequence(parts: tuple[str, str]) -> str:
    return '["' + parts[0] + '","' + parts[1] + '"]'


def envelope(
    operation: Operation,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    position: Position,
    *,
    name: str,
    database: str,
    now_ms: int,
    transaction: Transaction | None,
) -> dict[str, Any]:
    """One event's value (``dumps`` it with ``pgshovel.stream.typed_json.dumps``)."""
    return {
        "before": before,
        "after": after,
        "source": {
            "version": pgshovel.__version__,
            "connector": CONNECTOR,
            "name": name,
            "ts_ms": position.changed_micros // 1000,
            "snapshot": position.snapshot,
            "db": database,
            "sequence": _sequence(position.sequence),
            "schema": position.schema,
            "table": position.table,
            "txId": position.transaction,
            "lsn": None,
            "xmin": None,
        },
        "op": operation,
        "ts_ms": now_ms,
        "transaction": None
        if transaction is None
        else {
            "id": transaction.id,
            "total_order": transaction.total_order,
            "data_collection_order": transaction.data_collection_order,
        },
    }
