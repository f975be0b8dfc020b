"""The demo's child processes: run pgshovel commands, start the relay and worker, stop them by PID.

Long-running services start in their own session (process group), so a Ctrl-C
in the terminal reaches only the demo, which then stops each service itself:
SIGTERM to the PID, a grace period, then SIGKILL to the service's own process
group (which also ends what it spawned, such as Spark's JVM). Their output
goes to a log file each.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pgshovel.errors import PgshovelError

log = logging.getLogger(__name__)

STOP_TIMEOUT = 30.0


class DemoError(PgshovelError):
    """A step of the demo failed; the message names the step and where to look."""


def console_script(name: str) -> str:
    """The path of a pgshovel console script, preferring the running interpreter's environment."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise DemoError(f"console script {name!r} not found: install pgshovel (make setup)")
    return found


def run_command(command: Sequence[str], environment: Mapping[str, str], timeout: float) -> str:
    """Run a command to completion; its output, or a :class:`DemoError` showing that output."""
    try:
        done = subprocess.run(
            list(command),
            env=dict(environment),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        shown = " ".join([Path(command[0]).name, *command[1:]])
        raise DemoError(f"{shown!r} did not finish within {timeout:.0f}s") from error
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        shown = " ".join([Path(command[0]).name, *command[1:]])
        raise DemoError(f"{shown!r} failed with status {done.returncode}: {output}")
    return output


@dataclass
class Service:
    """A started long-running child process and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def start_service(
    name: str, command: Sequence[str], log_path: Path, environment: Mapping[str, str]
) -> Service:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as output:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(environment),
            start_new_session=True,
        )
    log.info("started %s (pid %d), log %s", name, process.pid, log_path)
    return Service(name, process, log_path)


def stop_service(service: Service, timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM, wait, then SIGKILL its process group; return the exit status."""
    if service.running():
        service.process.send_signal(signal.SIGTERM)
        try:
            service.process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning(
                "%s (pid %d) ignored SIGTERM for %.0fs: killing it", *_who(service), timeout
            )
            _signal_group(service.pid, signal.SIGKILL)
            service.process.wait(timeout)
    _end_group(service.pid)
    return service.process.returncode


def _who(service: Service) -> tuple[str, int]:
    return service.name, service.pid


def _end_group(group: int) -> None:
    """Stop what the service left behind in its process group (it led the group)."""
    if not _signal_group(group, signal.SIGTERM):
        return
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if not _signal_group(group, 0):
            return
        time.sleep(0.2)
    _signal_group(group, signal.SIGKILL)


def _signal_group(group: int, signum: int) -> bool:
    """Signal process group ``group``; False when no process is left in it."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True
