"""What a plan does to each table of a set: the summary ``--dry-run`` prints before any SQL.

Pure: compares the tables a set holds (its stored configuration) with those a
plan captures (``install.TableCapture``) and says, per table, whether it is
added, changed (key, columns, provenance), unchanged or removed, and which
triggers it gets — statement triggers, or row triggers and why
(``catalog.row_triggers_reason``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pgshovel.admin import grants
from pgshovel.admin.install import TableCapture
from pgshovel.cluster import names
from pgshovel.protocol import configuration_pb2

#: ``kept``: a table whose triggers the plan leaves as they are (a note says why)
ChangeKind = Literal["added", "changed", "unchanged", "removed", "kept"]
TableConfiguration = configuration_pb2.TableConfiguration


@dataclass(frozen=True)
class TableChange:
    """One table of a set as a plan leaves it."""

    set_name: str
    schema: str
    name: str
    change: ChangeKind
    #: the triggers the plan installs: ``statement``, ``row``, or "" (none: dropped or kept)
    triggers: Literal["statement", "row", ""] = ""
    #: what changed (``changed``), how the table is captured (``added``), or why nothing is
    #: done to it (``removed``, ``kept``)
    details: tuple[str, ...] = ()
    #: why the table gets row triggers rather than statement triggers
    reason: str = ""

    def describe(self) -> str:
        """``public.orders: key (id), every column; statement triggers installed``."""
        parts = list(self.details)
        if self.triggers:
            done = "installed" if self.change == "added" else "reinstalled"
            kind = f"{self.triggers} triggers {done}"
            parts.append(f"{kind} ({self.reason})" if self.reason else kind)
        elif self.change == "removed" and not parts:
            parts.append("triggers dropped")
        return f"{self.schema}.{self.name}: " + "; ".join(parts)


def _key(configured: Sequence[str], resolved: Sequence[str] | None = None) -> str:
    """``key (a, b)`` as configured, else ``primary key (id)`` as resolved (``no key``: an
    unkeyed table), ``primary key`` when not resolved."""
    if configured:
        return "key (" + ", ".join(configured) + ")"
    if resolved is None:
        return "primary key"
    return "primary key (" + ", ".join(resolved) + ")" if resolved else "no key"


def _columns(columns: Sequence[str]) -> str:
    return "columns (" + ", ".join(columns) + ")" if columns else "every column"


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def _triggers(table: TableCapture) -> Literal["statement", "row"]:
    return "row" if table.row_triggers else "statement"


def added(set_name: str, table: TableCapture, configured: TableConfiguration) -> TableChange:
    """A table the plan starts capturing."""
    details = [_key(list(configured.key_columns), table.key_columns), _columns(table.columns)]
    if table.provenance:
        details[-1] += ", with provenance"
    return TableChange(
        set_name,
        table.schema,
        table.name,
        "added",
        _triggers(table),
        (", ".join(details),),
        table.row_triggers,
    )


def reinstalled(
    set_name: str,
    table: TableCapture,
    configured: TableConfiguration,
    before: TableConfiguration | None,
) -> TableChange:
    """A table the set keeps, its triggers installed again; what changed since ``before``."""
    if before is None:
        return added(set_name, table, configured)
    differences = []
    if list(before.key_columns) != list(configured.key_columns):
        differences.append(
            f"{_key(list(before.key_columns))} -> "
            f"{_key(list(configured.key_columns), table.key_columns)}"
        )
    if list(before.columns) != list(configured.columns):
        differences.append(f"{_columns(before.columns)} -> {_columns(configured.columns)}")
    if before.provenance != configured.provenance:
        differences.append(
            f"provenance {_on_off(before.provenance)} -> {_on_off(configured.provenance)}"
        )
    return TableChange(
        set_name,
        table.schema,
        table.name,
        "changed" if differences else "unchanged",
        _triggers(table),
        tuple(differences),
        table.row_triggers,
    )


def removed(set_name: str, table: TableConfiguration, *, exists: bool) -> TableChange:
    """A table that leaves the set (or whose set is dropped)."""
    details = () if exists else ("no longer exists: nothing to drop",)
    return TableChange(set_name, table.schema, table.name, "removed", "", details)


def kept(set_name: str, table: TableConfiguration) -> TableChange:
    """A table whose triggers the plan cannot install again and leaves as they are."""
    details = ("triggers left as they are (see the note)",)
    return TableChange(set_name, table.schema, table.name, "kept", "", details)


def set_update(
    set_name: str,
    before: Sequence[TableConfiguration],
    tables: Sequence[TableCapture],
    configured: Sequence[TableConfiguration],
    gone: Sequence[tuple[str, str]] = (),
) -> list[TableChange]:
    """Every table of a set update: the new configuration's in its order, then those it drops
    (``gone``: the dropped tables that no longer exist)."""
    old = {(table.schema, table.name): table for table in before}
    changes = [
        reinstalled(set_name, table, entry, old.get((table.schema, table.name)))
        for table, entry in zip(tables, configured, strict=True)
    ]
    kept_names = {(table.schema, table.name) for table in tables}
    changes += [
        removed(set_name, table, exists=(table.schema, table.name) not in gone)
        for table in before
        if (table.schema, table.name) not in kept_names
    ]
    return changes


def summary(changes: Sequence[TableChange]) -> list[str]:
    """Per set, a count of its tables by change and a line per table."""
    lines: list[str] = []
    sets = list(dict.fromkeys(change.set_name for change in changes))
    for set_name in sets:
        mine = [change for change in changes if change.set_name == set_name]
        counted = ", ".join(
            f"{count} {kind}"
            for kind in get_args(ChangeKind)
            if (count := sum(change.change == kind for change in mine))
        )
        lines.append(f"set {set_name!r}: {len(mine)} table(s): {counted}")
        width = max(len(change.change) for change in mine)
        lines += [f"  {change.change:<{width}}  {change.describe()}" for change in mine]
    return lines


def grant_lines(
    cluster: str, set_name: str = "", *, created: bool = False, added: int = 0
) -> list[str]:
    """What an install does about privileges, and the GRANTs the operator still runs after
    creating set ``set_name`` or adding ``added`` tables to it."""
    functions = len(grants.revoke_statements(cluster))
    lines = [
        f"EXECUTE on the {functions} SECURITY DEFINER functions of schema "
        f"{names.schema_name(cluster)!r} revoked from PUBLIC (as on every install)"
    ]
    if created:
        lines.append(
            "a relay or worker logging in as a role of its own (source_connection) needs "
            f"GRANTs: 'pgshovel-admin set grants {set_name} --relay-role ROLE --worker-role "
            "ROLE' prints them"
        )
    elif added:
        lines.append(
            f"a worker's own role (and a relay's that snapshots table topics) needs SELECT on "
            f"the {added} added table(s): 'pgshovel-admin set grants {set_name} --worker-role "
            "ROLE' prints the GRANTs"
        )
    return lines
