"""The worker's command line leaves without the interpreter's teardown, with its own status.

delta-rs's and Arrow's native threads sometimes abort that teardown after a
clean stop ("terminate called without an active exception", status 134), so
``run_and_leave`` flushes the logs and ends the process itself: the status is
the command's, its last log lines are written, and nothing registered for
the teardown (here an ``atexit`` handler standing for it) runs.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import atexit, logging, sys
import click
from pgshovel._cli import configure_logging, run_and_leave

atexit.register(lambda: print("teardown ran", file=sys.stderr))

@click.command()
@click.argument("how")
def command(how):
    configure_logging("INFO")
    logging.getLogger("pgshovel.test").info("stopped")
    print("printed", end="")
    if how == "status":
        sys.exit(3)
    if how == "fail":
        raise RuntimeError("broken")

run_and_leave(command, [sys.argv[1]])
"""


@pytest.mark.parametrize(("how", "status"), [("clean", 0), ("status", 3), ("fail", 1)])
def test_the_worker_command_line_leaves_with_its_status_and_its_logs(how: str, status: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, how],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == status, done.stderr
    assert done.stdout == "printed"
    assert "pgshovel.test: stopped" in done.stderr
    assert "teardown ran" not in done.stderr
    if how == "fail":
        assert "RuntimeError: broken" in done.stderr


def test_the_worker_entry_point_runs_its_command_and_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pgshovel.replication import cli

    ran: list[object] = []
    monkeypatch.setattr("pgshovel.replication.cli.run_and_leave", ran.append)
    cli.main()
    assert ran == [cli.command]
