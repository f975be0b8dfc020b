"""ChildProcess with real children: stop by PID, SIGKILL of the group, the log, idempotence."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgshovel.errors import SandboxError
from pgshovel.sandbox import ChildProcess
from pgshovel.sandbox._children import group_alive

Start = Callable[[str], ChildProcess]

#: Prints "ready" once its SIGTERM handler is installed, exits 3 on SIGTERM.
COOPERATIVE = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
print("ready", flush=True)
time.sleep(60)
"""

#: Ignores SIGTERM and starts a grandchild (which ignores it too) in its process group.
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("grandchild", grandchild.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def children() -> Iterator[list[ChildProcess]]:
    """Children a test starts; whatever still runs when it fails is killed."""
    started: list[ChildProcess] = []
    yield started
    for child in started:
        child.ensure_stopped()


@pytest.fixture
def start(tmp_path: Path, children: list[ChildProcess]) -> Start:
    """Start ``python -c script`` as a ChildProcess logging to ``child.log``."""

    def start(script: str) -> ChildProcess:
        child = ChildProcess.start("child", [sys.executable, "-c", script], tmp_path / "child.log")
        children.append(child)
        return child

    return start


def wait_for_line(child: ChildProcess, prefix: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in child.output().splitlines():
            if line.startswith(prefix):
                return line
        time.sleep(0.02)
    raise AssertionError(f"no line {prefix!r} in {child.output()!r}")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init to reap it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in {"Z", "X"}


def test_stop_of_a_cooperative_child_returns_its_exit_status(start: Start) -> None:
    child = start(COOPERATIVE)
    wait_for_line(child, "ready")
    assert child.running() and child.returncode is None
    assert child.stop(timeout=10) == 3
    assert not child.running() and child.returncode == 3
    assert child.stop() == 3  # again: nothing more to do


def test_stop_kills_a_child_ignoring_sigterm_and_its_grandchild(start: Start) -> None:
    child = start(STUBBORN)
    grandchild = int(wait_for_line(child, "grandchild").split()[1])
    assert os.getpgid(grandchild) == child.pid  # the child leads its own group
    started = time.monotonic()
    assert child.stop(timeout=0.3) == -signal.SIGKILL
    assert time.monotonic() - started < 3
    assert not alive(grandchild)
    assert not group_alive(child.pid)


def test_stop_ends_what_an_exited_child_left_in_its_group(start: Start) -> None:
    script = STUBBORN.replace("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n", "")
    child = start(script.replace("time.sleep(60)\n", ""))  # the grandchild stays
    grandchild = int(wait_for_line(child, "grandchild").split()[1])
    assert child.process.wait(10) == 0 and alive(grandchild)
    assert child.stop(timeout=5) == 0
    assert not alive(grandchild)


def test_kill_ends_the_whole_group(start: Start) -> None:
    child = start(STUBBORN)
    grandchild = int(wait_for_line(child, "grandchild").split()[1])
    child.kill()
    assert child.returncode == -signal.SIGKILL
    assert not alive(grandchild)
    child.kill()  # idempotent


def test_the_log_receives_the_output_and_is_appended_to(
    tmp_path: Path, children: list[ChildProcess]
) -> None:
    log = tmp_path / "logs" / "echo.log"
    log.parent.mkdir()
    log.write_text("earlier run\n")
    script = "import sys; print('out', flush=True); print('err', file=sys.stderr)"
    child = ChildProcess.start("echo", [sys.executable, "-c", script], log, env={"A": "1"})
    children.append(child)
    assert child.process.wait(10) == 0
    assert child.stop() == 0
    assert child.output().splitlines() == ["earlier run", "out", "err"]
    assert child.log_tail(2) == "out\nerr"
    assert child.name == "echo" and child.log_path == log


def test_environment_and_working_directory(tmp_path: Path, children: list[ChildProcess]) -> None:
    script = "import os; print(os.environ['GREETING'], os.getcwd())"
    child = ChildProcess.start(
        "env", [sys.executable, "-c", script], tmp_path / "env.log", {"GREETING": "hi"}, tmp_path
    )
    children.append(child)
    assert child.process.wait(10) == 0
    assert child.stop() == 0
    assert child.output().strip() == f"hi {tmp_path}"


def test_ensure_stopped_is_idempotent(start: Start) -> None:
    child = start(COOPERATIVE)
    wait_for_line(child, "ready")
    child.ensure_stopped()
    assert not child.running()
    child.ensure_stopped()
    assert child.stop() == -signal.SIGKILL


def test_signal_reaches_the_child(start: Start) -> None:
    child = start(COOPERATIVE)
    wait_for_line(child, "ready")
    child.signal(signal.SIGTERM)
    child.process.wait(10)
    assert child.returncode == 3
    child.signal(signal.SIGTERM)  # ended: nothing is signalled
    assert child.stop() == 3


def test_a_command_that_cannot_start_is_a_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="cannot start missing"):
        ChildProcess.start("missing", [str(tmp_path / "no-such-program")], tmp_path / "m.log")
