"""What a schema event (sql/schema.sql) says about a captured table, and what it means for a copy.

The event trigger records raw catalog facts inside the DDL's transaction: every
live column (name, number, type, nullability, default, PostgreSQL's "missing
value" for rows that existed before an ADD COLUMN), the unique indexes, and the
set's captured columns and key as its triggers know them. ``interpret`` turns
those facts, with the table's previous shape, into the new ``TableShape`` (by
the same rules admin checked the set with, ``captured_shape``), or a problem
when capture can no longer follow the set's configuration (or stopped: the
set's triggers disabled, another table under the set's table's name); the
constant values that existing rows got for added columns; and whether existing
rows were changed in a way no row event shows, so that a copy must read the
table again. Pure: the only outside knowledge, a type's name, comes through
``type_name``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pgshovel.errors import CodecError, ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.source._catalog import TableInfo, captured_shape
from pgshovel.source._shape import Column, TableShape

#: Event kinds, as the event trigger and admin write them.
ANNOUNCE, ALTER, DROP, REMOVE = "announce", "alter", "drop", "remove"
KINDS = (ANNOUNCE, ALTER, DROP, REMOVE)

# Plain casts (ALTER COLUMN ... TYPE without USING) whose result depends on the
# value alone, never on session settings: replaying them on a copy gives the
# very values the source got. Any other type change makes the copy read the
# table again.
_NUMBERS = frozenset({"int2", "int4", "int8", "numeric", "float4", "float8"})
_TEXTS = frozenset({"text", "varchar", "bpchar"})
_TO_TEXT = frozenset({"int2", "int4", "int8", "numeric", "bool", "uuid"})


def cast_is_exact(old: Column, new: Column) -> bool:
    """Whether the plain cast from ``old``'s type to ``new``'s gives setting-free values."""
    if old.type_name == new.type_name:
        return True  # a new type modifier: numeric(10,2) -> numeric(12,2), varchar(n) -> (m)
    if old.type_name in _NUMBERS and new.type_name in _NUMBERS:
        return True
    if new.type_name in _TEXTS:
        return old.type_name in _TEXTS or old.type_name in _TO_TEXT
    return False


@dataclass(frozen=True)
class ColumnFacts:
    """One live column as the event trigger saw it."""

    name: str
    number: int
    type_oid: int
    sql_type: str
    not_null: bool
    has_default: bool
    has_missing: bool
    #: ``attmissingval`` as text: a one-element array literal of the column's type
    missing: str | None
    generated: bool


@dataclass(frozen=True)
class TableFacts:
    """The parsed data of a schema event."""

    kind: str
    command: str
    relation: int
    rewritten: bool
    columns: tuple[ColumnFacts, ...]
    #: unique, valid, plain indexes: (is primary, column names)
    indexes: tuple[tuple[bool, tuple[str, ...]], ...]
    #: the set's captured columns; None: every column
    captured: tuple[str, ...] | None
    key_columns: tuple[str, ...]
    #: the set's triggers on the table that do not fire (DISABLE TRIGGER, ENABLE REPLICA)
    disabled: tuple[str, ...] = ()
    #: the table holds a name of the set's tables without the set's triggers (recreated)
    uncaptured: bool = False

    @classmethod
    def parse(cls, text: str | None, event_id: int) -> TableFacts:
        """The facts of event ``event_id``; ``CodecError`` when they are not what sql/schema.sql
        writes."""
        try:
            data: dict[str, Any] = json.loads(text or "")
            kind = str(data["kind"])
            if kind not in KINDS:
                raise ValueError(f"unknown kind {kind!r}")
            return cls(
                kind=kind,
                command=str(data.get("command") or ""),
                relation=int(data.get("relation") or 0),
                rewritten=bool(data.get("rewritten", False)),
                columns=tuple(_column(item) for item in data.get("columns") or ()),
                indexes=tuple(
                    (bool(item["primary"]), tuple(str(name) for name in item["columns"]))
                    for item in data.get("indexes") or ()
                ),
                captured=None
                if data.get("captured") is None
                else tuple(str(name) for name in data["captured"]),
                key_columns=tuple(str(name) for name in data.get("key_columns") or ()),
                disabled=tuple(str(name) for name in data.get("disabled") or ()),
                uncaptured=bool(data.get("uncaptured", False)),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CodecError(
                f"schema event {event_id} holds {str(text)[:120]!r}, not what pgshovel's event "
                f"trigger writes ({error}); was it written by sql/schema.sql?"
            ) from error

    def table_info(self, schema: str, name: str, type_name: Callable[[int], str]) -> TableInfo:
        """The table as the catalog described it inside the DDL's transaction."""
        columns = tuple(
            Column(
                name=facts.name,
                sql_type=facts.sql_type,
                type_name=type_name(facts.type_oid),
                not_null=facts.not_null,
                number=facts.number,
            )
            for facts in self.columns
        )
        not_null = {column.name for column in columns if column.not_null}
        primary = next((names for is_primary, names in self.indexes if is_primary), ())
        unique = tuple(names for _, names in self.indexes if set(names) <= not_null)
        return TableInfo(self.relation, schema, name, columns, primary, unique)


def _column(item: dict[str, Any]) -> ColumnFacts:
    return ColumnFacts(
        name=str(item["name"]),
        number=int(item["number"]),
        type_oid=int(item["type_oid"]),
        sql_type=str(item["sql_type"]),
        not_null=bool(item["not_null"]),
        has_default=bool(item.get("has_default", False)),
        has_missing=bool(item.get("has_missing", False)),
        missing=None if item.get("missing") is None else str(item["missing"]),
        generated=bool(item.get("generated", False)),
    )


@dataclass(frozen=True)
class Interpretation:
    """What a schema event means for consumers of the set's stream."""

    #: the table's new shape; None when it was dropped, removed, or cannot be captured
    shape: TableShape | None
    #: why capture cannot follow the set's configuration any more, and the remedy ("" if it can)
    problem: str
    #: added columns whose existing rows got one constant: (column, missing value text)
    added_defaults: tuple[tuple[Column, str], ...]
    #: existing rows changed without row events: the copy must read the table again
    rewrites_rows: bool
    #: how the table's events decode from here on (every live column when the shape is None)
    decode_columns: tuple[Column, ...]


def interpret(
    facts: TableFacts,
    schema: str,
    name: str,
    previous: TableShape | None,
    type_name: Callable[[int], str],
    set_name: str,
) -> Interpretation:
    """Read the event ``facts`` of table ``schema.name`` against its ``previous`` shape."""
    if facts.kind in (DROP, REMOVE):
        return Interpretation(None, "", (), False, ())
    info = facts.table_info(schema, name, type_name)
    stopped = _stopped(facts, schema, name, set_name)
    if stopped:
        return Interpretation(None, stopped, (), False, info.columns)
    table = configuration_pb2.TableConfiguration(
        schema=schema,
        name=name,
        key_columns=list(facts.key_columns),
        columns=list(facts.captured or ()),
    )
    try:
        shape = captured_shape(table, info, allow_unkeyed=True, database="the source")
    except ConfigurationError as error:
        problem = (
            f"{error}; capture can no longer follow set {set_name!r} ({facts.command}): run "
            f"'pgshovel-admin set update {set_name} FILE' with the table's current columns "
            "and key, after which consumers copy the table again"
        )
        return Interpretation(None, problem, (), False, info.columns)
    if previous is None:
        # A first announcement has nothing to compare with; a change of a table whose
        # earlier shape is unknown (a set created before schema capture) may have done
        # anything to existing rows: read the table again.
        return Interpretation(shape, "", (), facts.kind == ALTER, shape.columns)
    defaults, rewrites = _effects(facts, shape, previous)
    return Interpretation(shape, "", defaults, rewrites or facts.rewritten, shape.columns)


def _stopped(facts: TableFacts, schema: str, name: str, set_name: str) -> str:
    """Why nothing written to the table reaches the set's queue any more, and the remedy."""
    label = f"{schema!r}.{name!r}"
    if facts.uncaptured:
        return (
            f"table {label} is not the table set {set_name!r} captured: it was created again "
            f"(or another table took its name) without the set's triggers ({facts.command}), "
            f"so nothing written to it is captured; run 'pgshovel-admin set update {set_name} "
            "FILE' to capture it, after which consumers copy the table again"
        )
    if facts.disabled:
        enable = "; ".join(
            f"ALTER TABLE {_quoted(schema)}.{_quoted(name)} ENABLE TRIGGER {_quoted(trigger)}"
            for trigger in facts.disabled
        )
        return (
            f"capture of table {label} by set {set_name!r} is disabled: its trigger(s) "
            f"{list(facts.disabled)!r} do not fire ({facts.command}: DISABLE TRIGGER or ENABLE "
            "REPLICA TRIGGER), so rows written meanwhile are not captured; enable them "
            f"({enable}), after which consumers copy the table again"
        )
    return ""


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _effects(
    facts: TableFacts, shape: TableShape, previous: TableShape
) -> tuple[tuple[tuple[Column, str], ...], bool]:
    """Constant values of added columns, and whether other values changed without events."""
    before = {column.number: column for column in previous.columns}
    by_number = {column.number: column for column in facts.columns}
    defaults: list[tuple[Column, str]] = []
    rewrites = False
    for column in shape.columns:
        old = before.get(column.number)
        if old is not None:
            rewrites = rewrites or (
                old.sql_type != column.sql_type and not cast_is_exact(old, column)
            )
            continue
        added = by_number.get(column.number)
        if facts.kind == ANNOUNCE or added is None or added.generated:
            # Newly captured (set update), or computed for every row: values are unknown.
            rewrites = True
        elif added.has_missing and added.missing is not None:
            defaults.append((column, added.missing))
        elif added.has_default:
            rewrites = True  # a volatile default: every existing row got its own value
    return tuple(defaults), rewrites


def missing_value_text(
    missing: str, parse_array: Callable[[str], Sequence[str | None]]
) -> str | None:
    """The value text inside ``attmissingval``'s one-element array literal."""
    elements = parse_array(missing)
    if len(elements) != 1:
        raise CodecError(f"a missing value must be a one-element array, got {missing!r}")
    return elements[0]
