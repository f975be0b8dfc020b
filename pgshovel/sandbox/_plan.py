"""Pure decisions of the sandbox's bookkeeping: ports, leftover processes, where PostgreSQL lives.

The functions take what the I/O layer observed (``/proc`` text, file modes,
which ports are free) and return what to do, so crash recovery can be
unit-tested without starting anything.
"""

from __future__ import annotations

import enum
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Kafka must stop before the ZooKeeper it registers in; PostgreSQL is independent.
SERVICES: tuple[str, ...] = ("postgres", "zookeeper", "kafka")
STOP_ORDER: tuple[str, ...] = ("kafka", "zookeeper", "postgres")

# A unix socket path must fit sockaddr_un.sun_path (108 bytes with the NUL).
MAX_SOCKET_PATH = 107
_SOCKET_NAME_ROOM = len("/.s.PGSQL.65535.lock")

_TCP_LISTEN = "0A"


class ProcessState(enum.Enum):
    """What a recorded PID refers to now."""

    OURS = "ours"  # alive and running the sandbox's own command line
    GONE = "gone"  # no such process (or a zombie waiting to be reaped)
    FOREIGN = "foreign"  # the PID was reused by an unrelated process: never signal it


def classify_process(stat_text: str | None, cmdline: Sequence[str], marker: str) -> ProcessState:
    """Classify a PID from its ``/proc/<pid>/stat`` text and command line.

    ``marker`` is a path only the sandbox's process has on its command line (the
    PostgreSQL data directory, the ZooKeeper or Kafka configuration file).
    """
    if stat_text is None or process_state_letter(stat_text) in {"Z", "X"}:
        return ProcessState.GONE
    return ProcessState.OURS if marker in cmdline else ProcessState.FOREIGN


def process_state_letter(stat_text: str) -> str:
    """The state field of ``/proc/<pid>/stat`` (after the parenthesised command name)."""
    _, _, rest = stat_text.rpartition(")")
    fields = rest.split()
    return fields[0] if fields else "?"


def parse_cmdline(raw: bytes) -> list[str]:
    """``/proc/<pid>/cmdline`` (NUL-separated) as a list of arguments."""
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]


def processes_to_stop(
    recorded: Mapping[str, Iterable[int]], states: Mapping[int, ProcessState]
) -> list[tuple[str, int]]:
    """The sandbox's own live processes among the recorded PIDs, in stopping order."""
    plan: list[tuple[str, int]] = []
    for service in STOP_ORDER:
        for pid in sorted(set(recorded.get(service, ()))):
            if states.get(pid) is ProcessState.OURS:
                plan.append((service, pid))
    return plan


def choose_ports(
    previous: Mapping[str, int],
    is_free: Callable[[int], bool],
    allocate: Callable[[], int],
    services: Sequence[str] = SERVICES,
) -> dict[str, int]:
    """One distinct port per service: the previous run's port if still free, else a new one."""
    chosen: dict[str, int] = {}
    for service in services:
        port = previous.get(service)
        if port is None or port in chosen.values() or not is_free(port):
            port = allocate()
            while port in chosen.values():
                port = allocate()
        chosen[service] = port
    return chosen


def listening_inodes(proc_net_tcp: str, port: int) -> set[int]:
    """Socket inodes listening on ``port`` in a ``/proc/net/tcp`` or ``tcp6`` table."""
    inodes: set[int] = set()
    for line in proc_net_tcp.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN:
            continue
        _, _, port_hex = fields[1].rpartition(":")
        if int(port_hex, 16) == port:
            inodes.add(int(fields[9]))
    return inodes


def socket_inode(link: str) -> int | None:
    """The inode of a ``socket:[12345]`` file-descriptor link, else None."""
    if link.startswith("socket:[") and link.endswith("]"):
        return int(link[len("socket:[") : -1])
    return None


def traversable(mode: int, owner: int, group: int, uid: int, gids: Iterable[int]) -> bool:
    """Whether a user may enter a directory with these permission bits and owners."""
    if uid == 0:
        return True
    if owner == uid:
        return bool(mode & stat.S_IXUSR)
    if group in set(gids):
        return bool(mode & stat.S_IXGRP)
    return bool(mode & stat.S_IXOTH)


@dataclass(frozen=True)
class PostgresLocation:
    """Where the sandbox keeps PostgreSQL: ``root`` holds ``data/`` and the socket directory."""

    root: Path

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"


def postgres_location(
    state_dir: Path, recorded_data_dir: str, reachable: bool, fallback_root: Path
) -> PostgresLocation:
    """Keep PostgreSQL in the state directory when its server user can reach it.

    The server refuses to run as root, so its user must be able to enter every
    parent of the data directory, and the socket path must fit a unix socket
    address. Otherwise the data lives under ``fallback_root`` (a directory that
    user owns), and ``sandbox.json`` records where. A previous run's location wins
    so its data is reused.
    """
    if recorded_data_dir:
        return PostgresLocation(Path(recorded_data_dir).parent)
    inside = PostgresLocation(state_dir / "postgres")
    if reachable and len(str(inside.socket_dir)) + _SOCKET_NAME_ROOM <= MAX_SOCKET_PATH:
        return inside
    return PostgresLocation(fallback_root)


def pid_in_file(contents: str) -> int | None:
    """The PID on the first line of a PID file or ``postmaster.pid``, or None if there is none."""
    first = contents.splitlines()[0].strip() if contents.strip() else ""
    return int(first) if first.isdigit() else None
