"""The demo's child processes: run pgshovel commands, start the relay and worker, stop them by PID.

Long-running services are :class:`pgshovel.sandbox.ChildProcess` objects, each
in its own session (process group), so a Ctrl-C in the terminal reaches only
the demo, which then stops each service itself: SIGTERM to the PID, a grace
period, then SIGKILL to the service's own process group (which also ends what
it spawned, such as Spark's JVM). Their output goes to a log file each.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pgshovel.errors import PgshovelError
from pgshovel.sandbox import ChildProcess

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


#: A started long-running child process and its log.
Service = ChildProcess


def start_service(
    name: str, command: Sequence[str], log_path: Path, environment: Mapping[str, str]
) -> Service:
    """Start a service in its own session with a fresh log (this run's output only)."""
    log_path.unlink(missing_ok=True)
    return ChildProcess.start(name, command, log_path, env=environment)


def stop_service(service: Service, timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM, wait, then SIGKILL its process group; return the exit status."""
    return service.stop(timeout)
