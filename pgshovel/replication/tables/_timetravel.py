"""Time travel by source transaction: the table version that first holds a source txid.

Every commit pgshovel makes records the source horizon of its micro-batch —
the ``txid_snapshot`` of the last batch's end tick: the copy at that version
is the source's state at that snapshot. Horizons only grow, so the versions
whose horizon shows a transaction as committed are a suffix of the history,
and a binary search finds the first of them. Read that version and you read
the copy exactly as the source was at a point at or after the transaction
committed — never before it (read-your-writes for the warehouse). None means
no version holds the transaction yet (or the log no longer holds versions old
enough to tell: Delta's log retention, expired Iceberg snapshots; the answer is
then the oldest version left that holds it). Commits without a record (a
maintenance commit of another tool) are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

from deltalake import DeltaTable
from pyiceberg.table import Table

from pgshovel.replication.tables._effect import CommitRecord
from pgshovel.stream.handoff import is_visible, parse_txid_snapshot

__all__ = ["delta_version_at", "first_holding", "iceberg_snapshot_at"]


def first_holding(horizons: Sequence[tuple[int, str]], txid: int) -> int | None:
    """The first ``(version, horizon)``'s version whose horizon shows ``txid`` committed."""
    low, high = 0, len(horizons)
    while low < high:
        middle = (low + high) // 2
        if is_visible(txid, parse_txid_snapshot(horizons[middle][1])):
            high = middle
        else:
            low = middle + 1
    return horizons[low][0] if low < len(horizons) else None


def delta_version_at(
    path: str, txid: int, storage_options: dict[str, str] | None = None
) -> int | None:
    """The first version of the Delta table at ``path`` that holds source transaction ``txid``.

    Read it with ``DeltaTable(path, version=...)`` (or Spark's ``versionAsOf``).
    """
    horizons = []
    for entry in DeltaTable(path, storage_options=storage_options).history():
        record = CommitRecord.from_properties(entry)
        if record is not None:
            horizons.append((int(entry["version"]), record.horizon))
    horizons.sort()
    return first_holding(horizons, txid)


def iceberg_snapshot_at(table: Table, txid: int) -> int | None:
    """The first snapshot id of the Iceberg ``table`` that holds source transaction ``txid``.

    Read it with ``table.scan(snapshot_id=...)`` (or Spark's ``VERSION AS OF``).
    """
    horizons = []
    for snapshot in table.snapshots():
        summary = snapshot.summary
        record = (
            None if summary is None else CommitRecord.from_properties(summary.additional_properties)
        )
        if record is not None:
            horizons.append((snapshot.sequence_number or 0, snapshot.snapshot_id, record.horizon))
    horizons.sort()
    return first_holding([(snapshot, horizon) for _, snapshot, horizon in horizons], txid)
