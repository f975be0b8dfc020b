"""A planned change: SQL per database and ZooKeeper operations, printable as is.

Planning reads (ZooKeeper, catalogs) and produces a ``Plan``; ``--dry-run``
prints it with ``render``; ``pgshovel.admin.twophase.execute`` applies it
atomically. ZooKeeper operations carry the node versions that were read, so the
multi-op fails if anybody changed them in between.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from psycopg2 import sql

from pgshovel.cluster.dsn import mask_dsn

ZooKeeperAction = Literal["check", "create", "set", "delete"]


@dataclass(frozen=True)
class ZooKeeperOperation:
    """One operation of the ZooKeeper multi-op; ``version`` -1 means any."""

    action: ZooKeeperAction
    path: str
    data: bytes = b""
    version: int = -1
    description: str = ""

    def describe(self) -> str:
        version = "" if self.version < 0 else f" (expecting version {self.version})"
        detail = f": {self.description}" if self.description else ""
        return f"{self.action} {self.path}{version}{detail}"


@dataclass(frozen=True)
class DatabaseStep:
    """Statements run in one two-phase transaction on one database."""

    dsn: str
    statements: tuple[sql.Composable, ...]


@dataclass(frozen=True)
class Plan:
    """Everything one admin command will change."""

    summary: str
    cluster: str
    databases: tuple[DatabaseStep, ...] = ()
    zookeeper: tuple[ZooKeeperOperation, ...] = ()
    notes: tuple[str, ...] = field(default=())


def render(plan: Plan, as_string: Callable[[str, sql.Composable], str]) -> str:
    """The plan as text; ``as_string(dsn, statement)`` renders SQL for that database."""
    lines = [f"plan: {plan.summary}"]
    lines += [f"note: {note}" for note in plan.notes]
    for step in plan.databases:
        lines.append(f"database {mask_dsn(step.dsn)!r} (one two-phase transaction):")
        lines += [f"  {as_string(step.dsn, statement)};" for statement in step.statements]
    if plan.zookeeper:
        lines.append("zookeeper (one multi-op):")
        lines += [f"  {operation.describe()}" for operation in plan.zookeeper]
    return "\n".join(lines)
