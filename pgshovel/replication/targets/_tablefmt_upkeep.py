"""Upkeep of the Delta Lake and Iceberg targets' tables: compaction and vacuum after a commit.

Every micro-batch adds files to the tables it touches; right after its commit,
in the thread that commits (so never concurrently with a MERGE), each of those
tables is maintained by the library's ``Maintenance``: compacted once it holds
more than ``max_small_files`` small files (their count stays bounded during a
long stream), sorted by its first key every 8th compaction, vacuumed hourly
keeping a week of history for time travel; a kept SCD2 history
(``<table>~history``) is maintained the same way right after its table.
Maintenance commits change no row and carry the last commit's record (a
history's: its own), so the position, a history's counter and time travel stay
as they were; a failure only postpones the table's upkeep to the next commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pgshovel.replication.tables._maintenance import (
    Maintenance,
    MaintenancePolicy,
    MaintenanceReport,
)
from pgshovel.source import TableShape

__all__ = ["maintain_committed", "upkeep_policy"]

logger = logging.getLogger(__name__)


def upkeep_policy(maintenance: bool, max_small_files: int) -> MaintenancePolicy | None:
    """The targets' ``maintenance`` and ``max_small_files`` settings as the library's policy
    (None: no upkeep)."""
    return MaintenancePolicy(max_small_files=max_small_files) if maintenance else None


def maintain_committed(
    maintenance: Maintenance,
    maintain: Callable[[Maintenance, TableShape], MaintenanceReport],
    shapes: Sequence[TableShape],
    suffix: str = "",
) -> None:
    """Maintain the tables a commit just touched (``suffix`` "~history": their histories),
    each on its own."""
    for shape in shapes:
        try:
            report = maintain(maintenance, shape)
        except Exception as error:  # compaction is tried again after the next commit
            logger.warning("maintenance of %s%s postponed: %s", shape.qualified, suffix, error)
            continue
        if report.compacted or report.removed:
            logger.info(
                "maintained %s%s: %d -> %d file(s)%s",
                shape.qualified,
                suffix,
                report.files_before,
                report.files_after,
                ", sorted" if report.sorted else "",
            )
