"""Status nodes: one ephemeral ZooKeeper node per running process, holding a JSON document.

Relay and worker each write theirs under a parent node of their set
(``names.relays_path``, ``names.workers_path``); ``set inspect`` and the
console read every child of that parent. A node is ephemeral, so a process
that died leaves no status behind. The parent is created only under an
existing set node, so a dropped set is never recreated by a late write.
"""

from __future__ import annotations

import json
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError


def write_status(client: KazooClient, parent: str, path: str, data: bytes) -> None:
    """Set ``path`` to ``data``, creating it (ephemeral) and ``parent`` when missing."""
    try:
        client.set(path, data)
        return
    except NoNodeError:
        pass
    try:
        client.create(parent)
    except NodeExistsError:
        pass
    except NoNodeError:
        return  # the set was dropped: leave it dropped
    client.create(path, data, ephemeral=True)


def read_statuses(client: KazooClient, parent: str) -> list[tuple[str, dict[str, Any]]]:
    """Every child of ``parent`` with its document, sorted by name; none when it is missing.

    A node that vanished meanwhile, or whose data is not JSON, is left out; a
    JSON value that is not an object reads as an empty document.
    """
    try:
        children = sorted(client.get_children(parent))
    except NoNodeError:
        return []
    statuses = []
    for child in children:
        try:
            data, _ = client.get(f"{parent}/{child}")
            document = json.loads(data.decode("utf-8"))
        except (NoNodeError, ValueError):
            continue
        except KazooException:
            raise
        statuses.append((child, document if isinstance(document, dict) else {}))
    return statuses
