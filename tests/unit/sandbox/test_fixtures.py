"""The test harness's own rules: integration tests must say so, unit runs start nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fix_sandbox import SPARK_DRIVER_JVM, unique_name

PROJECT = Path(__file__).resolve().parents[3]


def run_pytest(
    test_file: Path, environ: dict[str, str] | None = None, *options: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(PROJECT / "pyproject.toml"),
            "--rootdir",
            str(PROJECT),
            "-p",
            "no:cacheprovider",
            *options,
            str(test_file),
        ],
        cwd=PROJECT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_unmarked_test_using_a_sandbox_fixture_fails_without_starting_services(
    tmp_path: Path,
) -> None:
    test_file = tmp_path / "test_unmarked.py"
    test_file.write_text("def test_needs_a_database(database):\n    assert database\n")
    result = run_pytest(test_file)
    assert result.returncode == 1
    assert "is not marked integration" in result.stdout
    assert "sandbox started" not in result.stdout


def test_a_run_without_integration_tests_starts_no_sandbox(tmp_path: Path) -> None:
    test_file = tmp_path / "test_plain.py"
    test_file.write_text("def test_arithmetic():\n    assert 1 + 1 == 2\n")
    result = run_pytest(test_file)
    assert result.returncode == 0, result.stdout
    assert "sandbox started" not in result.stdout


def test_unique_names_are_safe_identifiers() -> None:
    database = unique_name("My Table/Ünïcode", separator="_", limit=63)
    assert re.fullmatch(r"[a-z][a-z0-9_]*", database) and len(database) <= 63
    assert database.startswith("my_table_")
    assert unique_name("9lives", "-", 100).startswith("t-9lives-")
    assert unique_name("x" * 200, "_", 63) != unique_name("x" * 200, "_", 63)
    assert len(unique_name("x" * 200, "_", 63)) == 63


def test_a_test_run_records_no_sandbox_where_the_user_looks(tmp_path: Path) -> None:
    """What a run starts ('pgshovel-sandbox up', the demo's --keep-sandbox) records its
    sandbox in the run's own state home, never in the user's."""
    user_state = tmp_path / "user-state"
    test_file = tmp_path / "test_records.py"
    test_file.write_text(
        "import os\n"
        "from pathlib import Path\n"
        "from pgshovel.sandbox import _locate, remember\n"
        "def test_remember(tmp_path):\n"
        f"    assert os.environ['XDG_STATE_HOME'] != {str(user_state)!r}\n"
        "    (tmp_path / 'sandbox.json').write_text('{}')\n"
        "    remember(tmp_path)\n"
        "    assert _locate.records() == [(Path.cwd(), tmp_path)]\n"
    )
    result = run_pytest(test_file, {**os.environ, "XDG_STATE_HOME": str(user_state)})
    assert result.returncode == 0, result.stdout
    assert not user_state.exists()


def test_spark_drivers_of_a_run_start_with_the_quick_jvm_options_unless_some_are_set(
    tmp_path: Path,
) -> None:
    """A run sets SPARK_SUBMIT_OPTS (every Spark driver it starts reads it) when it is unset,
    and leaves the user's own alone."""
    test_file = tmp_path / "test_options.py"
    test_file.write_text(
        "import os\n"
        "def test_options():\n"
        "    print('options:', os.environ.get('SPARK_SUBMIT_OPTS'))\n"
    )
    unset = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    result = run_pytest(test_file, unset, "-s")
    assert result.returncode == 0, result.stdout
    assert f"options: {SPARK_DRIVER_JVM}" in result.stdout
    result = run_pytest(test_file, {**unset, "SPARK_SUBMIT_OPTS": "-Dmine=1"}, "-s")
    assert result.returncode == 0, result.stdout
    assert "options: -Dmine=1" in result.stdout
