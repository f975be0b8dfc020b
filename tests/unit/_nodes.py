"""Just enough of a ZooKeeper client for the status boards' unit tests: nodes in a dict."""

from __future__ import annotations

from kazoo.exceptions import NoNodeError


class Nodes:
    """``set``, ``create`` (the parent must exist, as in ZooKeeper) and ``delete``."""

    def __init__(self, *existing: str) -> None:
        self.data: dict[str, bytes] = dict.fromkeys(existing, b"")

    def set(self, path: str, data: bytes) -> None:
        if path not in self.data:
            raise NoNodeError(path)
        self.data[path] = data

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False) -> None:
        if path.rsplit("/", 1)[0] not in self.data:
            raise NoNodeError(path)
        self.data[path] = data

    def delete(self, path: str) -> None:
        if path not in self.data:
            raise NoNodeError(path)
        del self.data[path]
