"""Process I/O for the sandbox: spawn detached servers, inspect PIDs in /proc, stop them, ports.

Servers run in their own session so they outlive ``pgshovel-sandbox up`` and a
Ctrl-C in its terminal does not reach them; ``down`` stops them by PID. A PID is
only ever signalled after its command line proved it is the sandbox's own
process (see :func:`pgshovel.sandbox._plan.classify_process`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from pgshovel.sandbox._plan import (
    ProcessState,
    classify_process,
    listening_inodes,
    parse_cmdline,
    socket_inode,
)

log = logging.getLogger(__name__)

# Popen objects of servers started by this interpreter: kept so they are reaped
# (no zombies, no "still running" ResourceWarning) when stopped from here.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def spawn(
    command: Sequence[str],
    log_file: Path,
    cwd: Path,
    user: str | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start a server detached from this process's session; return its PID."""
    with open(log_file, "ab") as output:
        process = _popen(command, output, cwd, user, env)
    _CHILDREN[process.pid] = process
    return process.pid


def _popen(
    command: Sequence[str],
    output: IO[bytes],
    cwd: Path | None,
    user: str | None,
    env: Mapping[str, str] | None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=None if env is None else dict(env),
        start_new_session=True,
        user=user,
        group=user,
        extra_groups=None if user is None else [],
    )


def state_of(pid: int, marker: str) -> ProcessState:
    """Whether ``pid`` is the sandbox's process (its command line holds ``marker``)."""
    _reap(pid)
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        cmdline = parse_cmdline(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return ProcessState.GONE
    return classify_process(stat_text, cmdline, marker)


def is_running(pid: int) -> bool:
    """Whether a process exists and is not a zombie (signal 0, then its /proc state)."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return classify_process(stat_text, [""], "") is not ProcessState.GONE


def stop_process(pid: int, marker: str, first_signal: int, timeout: float) -> None:
    """Signal the sandbox's process, wait up to ``timeout``, then SIGKILL it."""
    if state_of(pid, marker) is not ProcessState.OURS:
        return
    log.info("stopping pid %d with %s", pid, signal.Signals(first_signal).name)
    _signal(pid, first_signal)
    if _wait_gone(pid, timeout):
        # Give whoever reaps it (us or init) a moment, so the PID is really gone.
        wait_exited(pid, 2.0)
        return
    log.warning("pid %d did not stop within %.0f s: killing it", pid, timeout)
    _signal(pid, signal.SIGKILL)
    if not _wait_gone(pid, 10.0):
        log.error("pid %d survived SIGKILL", pid)


def wait_exited(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` no longer exists at all (a zombie still does, until reaped)."""

    def exited() -> bool:
        _reap(pid)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    return wait_until(exited, timeout, interval=0.1)


def listens(pid: int, port: int) -> bool:
    """Whether ``pid`` itself holds the listening socket on ``port`` (Linux /proc).

    Guards against a free port being taken by somebody else's server between
    choosing it and our server binding it: a probe answered by that other
    server must not count as ours. Without /proc the check cannot be made and
    passes.
    """
    owners = _listening_inodes(port)
    return True if owners is None else bool(owners & _socket_inodes(pid))


def taken_by_another(pid: int, port: int) -> bool:
    """Whether some other process listens on ``port``, so ``pid`` can never bind it."""
    owners = _listening_inodes(port)
    if not owners:
        return False
    return not owners & _socket_inodes(pid)


def _listening_inodes(port: int) -> set[int] | None:
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return None
    inodes: set[int] = set()
    for table in tables:
        with contextlib.suppress(OSError):
            inodes |= listening_inodes(table.read_text(encoding="ascii"), port)
    return inodes


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                inode = socket_inode(os.readlink(entry))
                if inode is not None:
                    inodes.add(inode)
    return inodes


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` (like the servers, ignoring TIME_WAIT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def allocate_port() -> int:
    """A port the kernel considers free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def wait_until(
    ready: Callable[[], bool],
    timeout: float,
    interval: float = 0.2,
) -> bool:
    """Call ``ready`` until it returns true or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _wait_gone(pid: int, timeout: float) -> bool:
    return wait_until(lambda: not is_running(pid), timeout, interval=0.1)


def _reap(pid: int) -> None:
    """Collect the exit status of a server this interpreter started, if it ended."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
