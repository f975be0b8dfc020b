"""The sandbox's ZooKeeper 3.8: write zoo.cfg, start QuorumPeerMain standalone, ask ``srvr``.

``ruok`` answers ``imok`` as soon as the port is open; ``srvr`` reports a
``Mode:`` only once the server serves sessions, so that is what "ready" means.
"""

from __future__ import annotations

import socket
from pathlib import Path

from pgshovel.sandbox import _java, _process
from pgshovel.sandbox._render import render_properties, zookeeper_command, zookeeper_settings


def config_path(state_dir: Path) -> Path:
    return state_dir / "zookeeper" / "zoo.cfg"


def start(state_dir: Path, port: int, log_file: Path) -> int:
    config = config_path(state_dir)
    data_dir = config.parent / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    config.write_text(render_properties(zookeeper_settings(data_dir, port)), encoding="utf-8")
    command = zookeeper_command(_java.java_executable(), _java.zookeeper_classpath(), config)
    return _process.spawn(command, log_file, cwd=config.parent)


def answers(pid: int, port: int) -> bool:
    """Whether our server listens on ``port`` and serves client sessions."""
    return _process.listens(pid, port) and "Mode: " in four_letter_word(port, "srvr")


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
            connection.sendall(word.encode("ascii"))
            connection.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := connection.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode("utf-8", "replace")
