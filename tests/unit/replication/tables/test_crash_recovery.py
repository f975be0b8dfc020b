"""A micro-batch over several tables is exact after a crash at any point of its commit.

A child process (``_crash_child``) commits micro-batches to three tables and
dies (``os._exit``, as kill -9 leaves things) right after an intent is written,
between two tables' commits, or after a table's data files are written but
before its commit; and, separately, is killed with SIGKILL at random moments.
Started again it recovers from the intent log and the tables' counters, and
every table must then equal the model of the whole stream, hold the counter of
the last micro-batch that touched it, and no reader may see the stray files.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.unit.replication.tables import _crash_child as child
from tests.unit.replication.tables._model import rows_of

ROOT = Path(__file__).resolve().parents[4]
LAST = 5  # micro-batch 5 touches all three tables; the others two


def run(kind: str, root: Path, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tests.unit.replication.tables._crash_child", kind]
    command += [str(root), str(LAST), *([crash] if crash else [])]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def assert_exact(kind: str, root: Path) -> None:
    tables = child.open_tables(kind, root)
    models = child.expected(LAST)
    touches = child.last_touch(LAST)
    for table in child.SHAPES:
        assert rows_of(table, tables.read(table)) == models[table.name], table.name
        assert tables.counter(table) == touches[table.name], table.name


def data_files_on_disk(path: Path) -> set[str]:
    return {file.name for file in path.rglob("*.parquet") if "_delta_log" not in file.parts}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "crash"),
    [
        ("delta", "intent:3"),
        ("delta", "table:5:2"),
        ("delta", "files:5"),
        ("iceberg", "table:5:1"),
        ("iceberg", "files:5"),
    ],
)
def test_a_crash_at_each_point_of_a_commit_is_recovered_exactly(
    kind: str, crash: str, tmp_path: Path
) -> None:
    crashed = run(kind, tmp_path, crash)
    assert crashed.returncode == 9, crashed.stderr
    resumed = run(kind, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout.splitlines()[-1])
    counter = int(crash.split(":")[1])
    assert report["resumed_after"] == counter - 1
    assert report["reapplied"]  # the crashed micro-batch was applied again to its tables
    assert_exact(kind, tmp_path)
    if crash.startswith("files") and kind == "delta":
        # The data file the crashed MERGE left is read by nobody (above) and vacuumed.
        assert_strays_vacuumed(child.open_tables(kind, tmp_path))
        assert_exact(kind, tmp_path)


def assert_strays_vacuumed(tables: Any) -> None:
    strays: list[str] = []
    for table in child.SHAPES:
        path = Path(tables.path(table))
        referenced = {Path(uri).name for uri in DeltaTable(str(path)).file_uris()}
        strays += sorted(data_files_on_disk(path) - referenced)
    assert strays  # the crash left one
    for table in child.SHAPES:
        DeltaTable(tables.path(table)).vacuum(
            retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
        )
    left = set().union(*(data_files_on_disk(Path(tables.path(t))) for t in child.SHAPES))
    assert not left & set(strays)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_sigkill_at_random_moments_never_loses_or_repeats_a_change(
    kind: str, tmp_path: Path
) -> None:
    rng = random.Random(kind)
    command = [sys.executable, "-m", "tests.unit.replication.tables._crash_child", kind]
    command += [str(tmp_path), str(LAST)]
    for _ in range(2):
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(rng.uniform(1.0, 4.0))
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    finished = run(kind, tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert_exact(kind, tmp_path)
