"""CPU time and peak memory of processes from /proc (psutil is not a dependency).

CPU seconds are ``utime + stime`` of ``/proc/<pid>/stat``; peak RSS is
``VmHWM`` of ``/proc/<pid>/status``, which ``reset_peak`` sets back to the
current RSS (writing ``5`` to ``/proc/<pid>/clear_refs``) so one phase of a
long-lived process can be measured on its own. ``family`` adds the process's
descendants, e.g. the JVM Spark starts under the worker. The parsers are pure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK")


def parse_stat(text: str) -> tuple[int, float]:
    """(parent pid, CPU seconds of utime+stime) from the text of /proc/<pid>/stat."""
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    parent = int(fields[1])
    utime, stime = int(fields[11]), int(fields[12])
    return parent, (utime + stime) / _TICKS


def parse_peak_rss(text: str) -> int:
    """VmHWM in bytes from the text of /proc/<pid>/status (0 for a kernel thread)."""
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            number, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError(f"unexpected VmHWM unit {unit!r} in /proc status")
            return int(number) * 1024
    return 0


def _read(pid: int, name: str) -> str | None:
    try:
        return (_PROC / str(pid) / name).read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, grandchildren, ...)."""
    parents: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            text = _read(int(entry.name), "stat")
            if text is not None:
                parents[int(entry.name)] = parse_stat(text)[0]
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


def family(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    return [pid, *descendants(pid)]


@dataclass(frozen=True)
class Usage:
    """CPU seconds and the sum of peak RSS over a set of processes at one moment."""

    cpu_seconds: float
    peak_rss: int


def usage(pids: Iterable[int]) -> Usage:
    """Total CPU seconds so far and summed VmHWM of the processes still alive."""
    cpu = 0.0
    rss = 0
    for pid in pids:
        stat = _read(pid, "stat")
        status = _read(pid, "status")
        if stat is None or status is None:
            continue
        cpu += parse_stat(stat)[1]
        rss += parse_peak_rss(status)
    return Usage(cpu, rss)


def reset_peak(pids: Iterable[int]) -> None:
    """Restart VmHWM from the current RSS (best effort: needs owner or root rights)."""
    for pid in pids:
        try:
            (_PROC / str(pid) / "clear_refs").write_text("5")
        except OSError:
            continue
