"""``pip install pgshovel`` runs admin, relay and sandbox without PySpark; only the worker needs it.

The import chains are checked in a child interpreter whose imports of the
``spark`` extra (pyspark, pyarrow, pandas, and py4j under them) fail and are
recorded: importing every command line and printing every command's ``--help``
must not even try them.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgshovel.errors import ConfigurationError
from pgshovel.replication import spark

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import importlib.abc, json, sys
ATTEMPTS = []
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pyspark", "pyarrow", "pandas", "py4j"}:
            ATTEMPTS.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None
sys.meta_path.insert(0, Block())
import pgshovel.admin.cli, pgshovel.relay.cli, pgshovel.replication.cli, pgshovel.sandbox.cli
from pgshovel import _clidoc
_clidoc.render()  # every command's --help
print(json.dumps(ATTEMPTS))
"""


def test_no_command_line_imports_the_spark_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []


def test_the_blocker_would_notice_an_import() -> None:
    # The same child, asked to import the worker's snapshot loader (which needs pyspark).
    child = CHILD.replace("_clidoc.render()", "import pgshovel.replication.loaders")
    result = subprocess.run(
        [sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "pyspark" in result.stderr


def test_a_missing_spark_extra_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    present = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name: None if name in ("pyspark", "pandas") else present(name),
    )
    with pytest.raises(ConfigurationError) as raised:
        spark.require_spark()
    message = str(raised.value)
    assert "\n" not in message
    assert "pyspark, pandas" in message and "pip install 'pgshovel[spark]'" in message


def test_the_installed_spark_extra_passes() -> None:
    spark.require_spark()
