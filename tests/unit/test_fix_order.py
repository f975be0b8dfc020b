"""The suite's file order: the slowest files first, then integration, then unit files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from tests import fix_order

PROJECT = Path(__file__).resolve().parents[2]


class Item:
    """What the hook reads of a collected test: its node id and its integration marker."""

    def __init__(self, nodeid: str, integration: bool) -> None:
        self.nodeid = nodeid
        self.integration = integration

    def get_closest_marker(self, name: str) -> object | None:
        return object() if self.integration and name == "integration" else None


def test_the_slowest_files_exist_once_each_and_are_integration_files() -> None:
    assert fix_order.SLOWEST, "the list of the slowest files is empty"
    assert len(set(fix_order.SLOWEST)) == len(fix_order.SLOWEST)
    for path in fix_order.SLOWEST:
        assert (PROJECT / path).is_file(), f"{path} is gone: update tests/fix_order.py SLOWEST"
        assert path.startswith("tests/integration/"), path


def test_files_are_regrouped_whole_slowest_first_and_keep_their_own_order() -> None:
    slowest, second = fix_order.SLOWEST[0], fix_order.SLOWEST[1]
    items = [
        Item("tests/unit/test_a.py::test_one", False),
        Item("tests/integration/test_b.py::test_one", True),
        Item(f"{second}::test_x", True),
        Item("tests/unit/test_a.py::test_two", False),
        Item(f"{slowest}::test_z[2]", True),
        Item(f"{slowest}::test_z[1]", True),
        Item("tests/integration/test_b.py::test_two", True),
    ]
    fix_order.pytest_collection_modifyitems(cast(list[pytest.Item], items))
    assert [item.nodeid for item in items] == [
        f"{slowest}::test_z[2]",
        f"{slowest}::test_z[1]",
        f"{second}::test_x",
        "tests/integration/test_b.py::test_one",
        "tests/integration/test_b.py::test_two",
        "tests/unit/test_a.py::test_one",
        "tests/unit/test_a.py::test_two",
    ]


def test_pytest_collects_in_that_order_and_make_test_keeps_it() -> None:
    slowest = fix_order.SLOWEST[0]
    named = ["tests/unit/test_policy.py", "tests/integration/test_packaging.py", slowest]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *named],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    files = [line.split("::", 1)[0] for line in result.stdout.splitlines() if "::" in line]
    assert list(dict.fromkeys(files)) == [
        slowest,
        "tests/integration/test_packaging.py",
        "tests/unit/test_policy.py",
    ]
    # xdist would sort the files by their number of tests again without this option
    recipe = re.search(r"^test:.*\n\t(.*)$", (PROJECT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None
    assert "--dist loadfile --no-loadscope-reorder" in recipe.group(1)
