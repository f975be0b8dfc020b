"""Copies in table formats — Delta Lake (delta-rs) and Iceberg (pyiceberg) — as a library.

The core the worker's Delta and Iceberg targets are adapters over: a net
effect per key becomes one commit per table carrying the stream position
(``DeltaTables``, ``IcebergTables``), the intent log makes a micro-batch over
several tables exact after a crash (``commit_micro_batch``, ``recover``),
schema changes (``plan``), maintenance, the initial snapshot, the SCD2
history and time travel by source transaction (``delta_version_at``,
``iceberg_snapshot_at``). Needs the ``tables`` extra; names are imported when
first used, so ``import pgshovel.replication.tables`` itself costs nothing. See
the README's "Table formats".
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "CommitRecord",
    "DeltaHistory",
    "DeltaTables",
    "Evolution",
    "IcebergHistory",
    "IcebergTables",
    "Intent",
    "IntentLog",
    "Maintenance",
    "MaintenancePolicy",
    "NetEffect",
    "SnapshotWriter",
    "commit_delta_snapshot",
    "commit_iceberg_snapshot",
    "commit_micro_batch",
    "delta_version_at",
    "iceberg_snapshot_at",
    "lines_to_arrow",
    "plan",
    "recover",
]

_HOMES = {
    "CommitRecord": "_effect",
    "NetEffect": "_effect",
    "DeltaHistory": "_history",
    "DeltaTables": "_delta",
    "Evolution": "_evolution",
    "plan": "_evolution",
    "IcebergTables": "_iceberg",
    "IcebergHistory": "_iceberg_history",
    "Intent": "_intents",
    "IntentLog": "_intents",
    "commit_micro_batch": "_intents",
    "recover": "_intents",
    "Maintenance": "_maintenance",
    "MaintenancePolicy": "_maintenance",
    "SnapshotWriter": "_snapshot",
    "commit_delta_snapshot": "_snapshot",
    "commit_iceberg_snapshot": "_snapshot",
    "delta_version_at": "_timetravel",
    "iceberg_snapshot_at": "_timetravel",
    "lines_to_arrow": "_text",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
