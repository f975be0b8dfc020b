"""Child processes stopped by their PID: each in its own session, its output appended to a log.

:class:`ChildProcess` starts a command with ``start_new_session=True``, so the
child leads a process group of its own: a Ctrl-C in the terminal does not reach
it, and what it spawns (Spark's JVM, for one) is ended with it by signalling
that group. Only the child's PID and its own group are ever signalled, never
processes found by name. ``stop`` is graceful (SIGTERM, a grace period, then
SIGKILL to the group, then the same for whatever the child left in its group);
``kill`` is ``kill -9`` of the whole group. Unlike the sandbox's detached
servers (:mod:`pgshovel.sandbox._process`), these children do not outlive the
code that started them: each is reaped, so none is left a zombie.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox._plan import process_state_letter
from pgshovel.sandbox._process import _popen, wait_until

log = logging.getLogger(__name__)

#: How long the group's leftovers get after SIGTERM, and anything gets after SIGKILL.
GRACE = 10.0


class ChildProcess:
    """A child process in its own session (process group), its output appended to a log file.

    Constructing one starts the process (so does :meth:`start`, which reads
    better at call sites); it is always stopped by its PID. Call :meth:`stop`,
    :meth:`kill` or :meth:`ensure_stopped` before dropping it, or the child
    keeps running and is never reaped.
    """

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._finished = False
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            # The child holds its own copy of the descriptor: ours is closed at once.
            with log_path.open("ab") as output:
                self.process: subprocess.Popen[bytes] = _popen(command, output, cwd, None, env)
        except OSError as error:
            raise SandboxError(f"cannot start {name} ({command[0]!r}): {error}") from error
        log.info("started %s (pid %d), log %s", name, self.pid, log_path)

    @classmethod
    def start(
        cls,
        name: str,
        command: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ChildProcess:
        """Start ``command`` (environment ``env``, default ours) with its output in ``log_path``."""
        return cls(name, command, log_path, env=env, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: the signal that ended it), None while it runs."""
        return self.process.poll()

    def running(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        """The whole log text ("" when it cannot be read)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the child itself, unless it has already ended."""
        self.process.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait up to ``timeout``, then SIGKILL the group; end its leftovers.

        Returns the exit status (``-9`` when it had to be killed). Once stopped,
        it only returns that status again.
        """
        if not self._finished:
            if self.running():
                log.info("stopping %s (pid %d) with SIGTERM", self.name, self.pid)
                self.signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning(
                        "%s (pid %d) ignored SIGTERM for %.1f s: killing its process group",
                        self.name,
                        self.pid,
                        timeout,
                    )
                    signal_group(self.pid, signal.SIGKILL)
                    self._reap()
            end_group(self.pid)
            self._finished = True
        return self._status()

    def kill(self) -> None:
        """``kill -9`` of the whole process group: the child and all it spawned in it."""
        if self._finished:
            return
        log.info("killing %s (pid %d) and its process group", self.name, self.pid)
        signal_group(self.pid, signal.SIGKILL)
        self._reap()
        if not wait_until(lambda: not group_alive(self.pid), GRACE, interval=0.05):
            log.warning("process group %d of %s survived SIGKILL", self.pid, self.name)
        self._finished = True

    def ensure_stopped(self) -> None:
        """For teardown: kill whatever of the group still runs; nothing once stopped or killed."""
        self.kill()

    def _reap(self) -> None:
        try:
            self.process.wait(GRACE)
        except subprocess.TimeoutExpired as error:
            raise SandboxError(
                f"{self.name} (pid {self.pid}) survived SIGKILL for {GRACE:.0f} s"
            ) from error

    def _status(self) -> int:
        status = self.process.poll()
        if status is None:
            raise SandboxError(f"{self.name} (pid {self.pid}) is still running")
        return status


def signal_group(group: int, signum: int) -> bool:
    """Signal process group ``group``; False when no process of it can be signalled."""
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_alive(group: int) -> bool:
    """Whether process group ``group`` still has a member that is not a zombie.

    Zombies count as gone: an orphan's may wait for init to reap it. Without
    ``/proc`` any member counts.
    """
    if not signal_group(group, 0):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_text = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = stat_text.rpartition(")")[2].split()
        if len(fields) > 2 and fields[2] == str(group):
            if process_state_letter(stat_text) not in {"Z", "X"}:
                return True
    return False


def end_group(group: int) -> None:
    """End what is left in process group ``group``: SIGTERM, a grace period, then SIGKILL."""
    if not group_alive(group):
        return
    log.info("ending the leftovers of process group %d", group)
    signal_group(group, signal.SIGTERM)
    if wait_until(lambda: not group_alive(group), GRACE, interval=0.05):
        return
    log.warning("process group %d ignored SIGTERM for %.0f s: killing it", group, GRACE)
    signal_group(group, signal.SIGKILL)
    if not wait_until(lambda: not group_alive(group), GRACE, interval=0.05):
        log.warning("process group %d survived SIGKILL", group)
