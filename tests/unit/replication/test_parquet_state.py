"""The Parquet target's state file: names by commit, the state file of 0.2, a tampered file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pgshovel.errors import StateError
from pgshovel.replication.targets import _parquet_state
from pgshovel.replication.targets._parquet_state import (
    Stored,
    commit_of,
    committed_change,
    legacy_uncommitted,
    version_name,
)
from pgshovel.replication.targets.parquet import ParquetTarget
from pgshovel.stream import state as _worker
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.state import WorkerState

STATE = WorkerState(
    "streaming",
    "100:100:",
    StreamPosition((PartitionCursor(42, bytes(range(16)), 7, 3),)),
    horizon="120:121:",
)


def test_versions_are_named_by_commit_and_read_back() -> None:
    assert version_name(42, 3) == "v000000042-0003"
    assert commit_of("v000000042-0003") == 42
    # names of 0.2 (offsets), the snapshot, a chunk attempt: not a commit's
    for name in ("00000000000000000041-0000", "snapshot", "a1b2c3t1.0.ff00aa", "v12-3"):
        assert commit_of(name) is None


def test_a_change_file_is_committed_when_its_commit_is() -> None:
    stored = Stored(STATE, {}, commits=5)
    assert committed_change("v000000005-0002", stored)
    assert not committed_change("v000000006-0000", stored)
    # 0.2's files once the upgrade cleaned them: every one is committed
    assert committed_change("00000000000000000099-0000", stored)


def test_names_of_0_2_are_compared_with_the_0_2_position_until_the_upgrade() -> None:
    assert not legacy_uncommitted("00000000000000000041-0001", 41)
    assert legacy_uncommitted("00000000000000000042-0000", 41)
    legacy = Stored(STATE, {}, commits=0, legacy_applied=41)
    assert committed_change("00000000000000000041-0000", legacy)
    assert not committed_change("00000000000000000043-0000", legacy)


def test_the_state_file_of_0_2_reads() -> None:
    document = {
        "phase": "streaming",
        "snapshot": "100:100:",
        "start_offset": 3,
        "position": {
            "offset": 41,
            "publisher": bytes(range(16)).hex(),
            "sequence": 7,
            "epoch": 3,
            "committed": [],
        },
        "horizon": "120:121:",
        "versions": {"public.items": "00000000000000000041-0000"},
    }
    stored = _parquet_state.from_document(document)
    assert stored == Stored(
        STATE, {"public.items": "00000000000000000041-0000"}, 0, legacy_applied=41
    )
    before_any_batch = _parquet_state.from_document({**document, "position": None})
    assert before_any_batch.legacy_applied == -1


def test_the_state_file_round_trips(tmp_path: Path) -> None:
    stored = Stored(STATE, {"public.items": "v000000007-0001"}, 7)
    _parquet_state.write(tmp_path, stored)
    assert _parquet_state.read(tmp_path) == stored
    assert _parquet_state.read(tmp_path / "nothing") is None


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"format": 2, "state": {}, "versions": {}, "commits": 0}', "field 'phase' is missing"),
        ('{"format": 2, "versions": {}, "commits": 0}', "field 'state' is missing"),
        ("{not json", "not JSON"),
        (
            json.dumps(
                {
                    "format": 2,
                    "state": _worker.to_document(STATE),
                    "versions": {"public.items": "../.."},
                    "commits": 0,
                }
            ),
            "field 'versions.public.items': expected a version name",
        ),
        ("[]", "field 'state file': expected an object"),
    ],
)
def test_a_state_file_that_does_not_read_names_the_field_and_the_reload(
    tmp_path: Path, text: str, field: str
) -> None:
    (tmp_path / "_state.json").write_text(text)
    with pytest.raises(StateError) as raised:
        _parquet_state.read(tmp_path)
    message = str(raised.value)
    assert field in message and "\n" not in message
    assert f"the target must be reloaded: remove the directory {str(tmp_path)!r}" in message


def test_a_tampered_state_stops_the_target_and_the_named_remedy_reloads_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "copy"
    target = ParquetTarget(str(path))
    assert target.open("c", "s") is None
    target.store_state(STATE)
    target.close()
    document = json.loads((path / "_state.json").read_text())
    document["state"]["tasks"] = [{"id": "t", "schema": "public", "table": "items"}]
    (path / "_state.json").write_text(json.dumps(document))
    target = ParquetTarget(str(path))
    with pytest.raises(StateError, match=r"field 'tasks\[0\]\.purpose' is missing") as raised:
        target.open("c", "s")
    target.close()
    assert "rm -r" in str(raised.value)
    shutil.rmtree(path)  # the remedy the error names
    reloaded = ParquetTarget(str(path))
    assert reloaded.open("c", "s") is None, "an empty directory: the worker loads afresh"
    reloaded.close()
