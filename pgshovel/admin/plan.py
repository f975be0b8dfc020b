"""A planned change: SQL per database and ZooKeeper operations, printable as is.

Planning reads (ZooKeeper, catalogs) and produces a ``Plan``; ``--dry-run``
prints it with ``render``: a summary first (each table added, changed,
unchanged or removed with the triggers it gets, the grants, the capture
function and how many statements each database runs, the ZooKeeper
operations), the statements themselves only when asked (``--sql``).
``pgshovel.admin.twophase.execute`` applies it atomically. ZooKeeper
operations carry the node versions that were read, so the multi-op fails if
anybody changed them in between.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from psycopg2 import sql

from pgshovel.admin.changes import TableChange, summary
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
    #: the capture function this database gets (``c`` or ``plpgsql``), "" when none
    capture: str = ""


@dataclass(frozen=True)
class Plan:
    """Everything one admin command will change."""

    summary: str
    cluster: str
    databases: tuple[DatabaseStep, ...] = ()
    zookeeper: tuple[ZooKeeperOperation, ...] = ()
    notes: tuple[str, ...] = field(default=())
    #: what the plan does to each table, in the order the summary lists them
    tables: tuple[TableChange, ...] = ()
    #: what the plan does about privileges, and what the operator still has to grant
    grants: tuple[str, ...] = ()


def render(
    plan: Plan, as_string: Callable[[str, sql.Composable], str], *, statements: bool = False
) -> str:
    """The plan as text: the summary, and with ``statements`` every statement as
    ``as_string(dsn, statement)`` renders it for that database."""
    lines = [f"plan: {plan.summary}", *summary(plan.tables)]
    lines += [f"grants: {grant}" for grant in plan.grants]
    for step in plan.databases:
        capture = f"; capture function LANGUAGE {step.capture}" if step.capture else ""
        count = len(step.statements)
        lines.append(
            f"database {mask_dsn(step.dsn)!r} (one two-phase transaction{capture}): "
            f"{count} statement{'' if count == 1 else 's'}" + (":" if statements else "")
        )
        if statements:
            lines += [f"  {as_string(step.dsn, statement)};" for statement in step.statements]
    if plan.zookeeper:
        lines.append("zookeeper (one multi-op):")
        lines += [f"  {operation.describe()}" for operation in plan.zookeeper]
    lines += [f"note: {note}" for note in plan.notes]
    return "\n".join(lines)
