"""The README's quick start, run as written against the test sandbox: the INSERT reaches the copy.

The fenced block under "Quick start" is taken from README.md; only the lines that start and
stop a sandbox of their own (``pgshovel-sandbox up``, ``env``, ``down``) are left out, the run's
sandbox standing in for them through the same ``PGSHOVEL_*`` variables (fresh source and target
databases, a cluster of the test's own).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg2
import pytest

from pgshovel.sandbox import SandboxConnection
from tests.fix_sandbox import MakeDatabase

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Quick start"


def quickstart_block() -> str:
    """The first ```sh block after the quick start's heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(HEADING, 1)[1]
    return section.split("```sh\n", 1)[1].split("\n```", 1)[0]


def runnable(block: str) -> str:
    """The block without the lines managing a sandbox of its own, stopping at the first error."""
    lines = ["set -euo pipefail"]
    for line in block.splitlines():
        kept = [
            command
            for command in line.split("; ")
            if "pgshovel-sandbox" not in command.split("#", 1)[0]
        ]
        if kept:
            lines.append("; ".join(kept))
    return "\n".join(lines) + "\n"


def test_the_block_only_loses_the_sandbox_lines() -> None:
    script = runnable(quickstart_block())
    assert "pgshovel-sandbox" not in script
    for command in ("set create", "pgshovel-relay", "pgshovel-replicate", "set tail", "kill %1"):
        assert command in script


def _stop_group(process: subprocess.Popen[str]) -> None:
    """The script's background relay and worker share its process group: stop what is left."""
    for signum, grace in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def test_the_quick_start_replicates_an_insert(
    sandbox: SandboxConnection, make_database: MakeDatabase, cluster_name: str, tmp_path: Path
) -> None:
    source, target = make_database("quick_source"), make_database("quick_target")
    environment = {
        **os.environ,
        **sandbox.environment(),
        "PGSHOVEL_SOURCE_DSN": source,
        "PGSHOVEL_TARGET_DSN": target,
        "PGSHOVEL_CLUSTER": cluster_name,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    (tmp_path / "example").symlink_to(ROOT / "example")
    output, errors = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    # Files, not pipes: the background relay and worker hold the script's output open.
    with output.open("w") as out, errors.open("w") as err:
        process = subprocess.Popen(
            ["bash", "-c", runnable(quickstart_block())],
            cwd=tmp_path,
            env=environment,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        try:
            process.wait(timeout=600)
        finally:
            _stop_group(process)
    stdout = output.read_text()
    logs = "\n".join(
        f"--- {path.name}:\n{path.read_text()[-4000:]}"
        for path in (errors, tmp_path / "relay.log", tmp_path / "worker.log")
        if path.exists()
    )
    assert process.returncode == 0, f"stdout:\n{stdout}\n{logs}"
    # psql's table, then set tail's JSON lines: the table's shape, the INSERT
    table, tail = stdout.split("(1 row)", 1)
    assert "hello" in table, stdout
    assert '"INSERT"' in tail and '"hello"' in tail, stdout
    connection = psycopg2.connect(target)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, body FROM notes")
            assert cursor.fetchall() == [(1, "hello")]
    finally:
        connection.close()
