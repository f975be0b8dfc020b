"""Staged apply into Delta and Iceberg: Spark tasks stage files, the driver commits once.

Random micro-batches of a keyed table's row changes (inserts, updates that keep
or move keys across partitions, deletes, TRUNCATE, provenance) are encoded as
the relay's ROWS messages, routed to partitions, cut into tasks, and staged by
tasks of a real local SparkSession through the target's own ``stage_sink``;
the driver commits them with ``commit_stages``. A second copy applies the same
changes through the driver path (planner, ``apply``); after every micro-batch
both tables are equal column for column, change columns included (and the
Delta copy's SCD2 history, whose closed versions carry the deleting
transaction). A killed
attempt's files (never handed back to the driver) are never read, whether
planted beside the micro-batch's or left by a task Spark retried (a session of
its own that retries, ``local[2,2]``); each micro-batch's directory is gone
after its commit, and a crash's leftover directory is removed when the target
opens.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pgshovel.replication.staging.reduce import reduce_messages
from pgshovel.replication.staging.tablefmt import MICRO_BATCH_PREFIX
from pgshovel.replication.tables._history import END_TXID
from tests._staged_rows import DELETE, INSERT, KEYED, TRUNCATE, UPDATE

from ._tablefmt_stage import (
    RETRIED,
    SHAPES,
    apply_driver,
    make,
    plan,
    stage_micro_batch,
    start,
    state,
    table,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_staged_micro_batches_equal_the_driver_path(spark: Any, kind: str, tmp_path: Path) -> None:
    seed = 11 if kind == "delta" else 12
    staged_target = start(kind, tmp_path / "staged")
    driver_target = start(kind, tmp_path / "driver")
    staging = staged_target.files.staging / "_staging"
    number = 0
    for micro_batch, (_parts, whole, batch_ids, tasks) in enumerate(plan(seed)):
        number += len(batch_ids)
        apply_driver(driver_target, whole, batch_ids, number)
        # A killed attempt of task 0, planted in the micro-batch's directory: every key it
        # touched deleted. The driver never gets it back, so it is never read.
        sink, _ = staged_target.stage_sink(f"m{micro_batch}")
        killed = reduce_messages(whole[:1], SHAPES, details=True)
        for found in killed.values():
            found.batch_ids = dict(enumerate(batch_ids))
            found.rows = {key: (place, True, "") for key, (place, _d, _l) in found.rows.items()}
        sink.stage(0, 9, killed)
        stages = stage_micro_batch(
            spark, staged_target, f"m{micro_batch}", tasks, batch_ids, number
        )
        assert stages and all("a0_" in Path(stage.path).name for stage in stages)
        assert not (staging / f"{MICRO_BATCH_PREFIX}m{micro_batch}").exists()
        assert table(staged_target) == table(driver_target), f"micro-batch {micro_batch}"
    assert table(staged_target)
    # versions closed by deletes and key changes, as the driver closed them
    ends = staged_target._histories.store.versions(KEYED).column(END_TXID)  # type: ignore[attr-defined]
    assert ends.null_count < len(ends), "the history holds closed versions"

    # A crash between staging and commit leaves a directory: removed when the target opens.
    leftover = staging / f"{MICRO_BATCH_PREFIX}dead"
    leftover.mkdir(parents=True)
    (leftover / "0a0_0.parquet").write_bytes(b"not parquet")
    staged_target.close()
    reopened = make(kind, tmp_path / "staged")
    assert reopened.open("c", "s") == state(number)
    assert not leftover.exists()
    assert table(reopened) == table(driver_target)
    reopened.close()
    driver_target.close()


def test_a_task_failing_after_staging_is_retried_and_applied_once(tmp_path: Path) -> None:
    """Delta and Iceberg in one session of their own (Spark retries a failed task there)."""
    seed = 13
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.replication._tablefmt_stage",
            str(tmp_path),
            "13",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    lines = [line.split(" ", 1) for line in process.stdout.splitlines()]
    assert [kind for kind, _ in lines] == ["delta"] * RETRIED + ["iceberg"] * RETRIED
    # Every micro-batch's task 0 failed once after staging and was retried: the stages the
    # driver committed are its attempt 1's (attempt 0's files lay beside them, unread).
    assert all(names.startswith("0a1_") for _, names in lines), lines
    for kind in ("delta", "iceberg"):
        driver_target = start(kind, tmp_path / f"driver-{kind}")
        number = 0
        for _parts, whole, batch_ids, _tasks in plan(seed)[:RETRIED]:
            number += len(batch_ids)
            apply_driver(driver_target, whole, batch_ids, number)
        staged_target = make(kind, tmp_path / kind)
        assert staged_target.open("c", "s") == state(number)
        assert table(staged_target) == table(driver_target), kind
        assert table(staged_target)
        staged_target.close()
        driver_target.close()


def test_the_plan_holds_truncates_and_key_changes() -> None:
    """The seeds above exercise TRUNCATE and key changes (else the tests would prove less)."""
    for seed in (11, 12, 13):
        changes = [
            change
            for _parts, whole, _ids, _tasks in plan(seed)
            for _ordinal, message in whole
            for change in message.changes
        ]
        assert {change.operation for change in changes} == {INSERT, UPDATE, DELETE, TRUNCATE}
        assert any(
            change.operation == UPDATE and change.old.split(b"\t")[0] != change.new.split(b"\t")[0]
            for change in changes
        ), seed
