"""One reader of the source catalog: tables, their columns and types, keys, unique indexes.

In the spirit of psycopg's ``TypeInfo.fetch``: the type of every column is
resolved once per type oid and cached (a type's identity never changes), domains
to their base type, recursively, and arrays of domains to arrays of the base
type, so the codec always decodes by the type PostgreSQL prints. Tables are read
afresh on every call: their shape is what changes. Admin checks a set against
it, the relay decodes events with it, the worker creates target tables from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg2.extensions import connection as Connection

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.source._shape import Column, TableShape

#: What a column of a type the catalog does not know decodes as (text kept verbatim).
UNKNOWN_TYPE = "unknown"

_TABLE = (
    "SELECT c.oid FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'r'"
)
_COLUMNS = (
    "SELECT attname, atttypid, pg_catalog.format_type(atttypid, atttypmod), attnotnull, attnum "
    "FROM pg_catalog.pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
    "ORDER BY attnum"
)
# Unique, valid, immediate, non-partial indexes on plain columns only; the
# primary key first, then by name.
_UNIQUE_INDEXES = (
    "SELECT i.indisprimary, ARRAY(SELECT a.attname FROM unnest(i.indkey::int2[]) "
    "WITH ORDINALITY AS k(attnum, position) JOIN pg_catalog.pg_attribute a "
    "ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.position) "
    "FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid "
    "WHERE i.indrelid = %s AND i.indisunique AND i.indisvalid AND i.indimmediate "
    "AND i.indpred IS NULL AND i.indexprs IS NULL AND NOT (0 = ANY(i.indkey::int2[])) "
    "ORDER BY i.indisprimary DESC, ic.relname"
)
_TYPE = "SELECT typname, typtype, typbasetype, typelem FROM pg_catalog.pg_type WHERE oid = %s"


@dataclass(frozen=True)
class TableInfo:
    """An ordinary table as the catalog describes it now."""

    oid: int
    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    #: Unique indexes usable as a key: every column NOT NULL; the primary key first.
    unique_keys: tuple[tuple[str, ...], ...]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    def column(self, name: str) -> Column | None:
        for column in self.columns:
            if column.name == name:
                return column
        return None

    def is_unique(self, key: Sequence[str]) -> bool:
        """Whether the columns ``key`` identify a row: they hold a NOT NULL unique index."""
        wanted = set(key)
        return any(set(index) <= wanted for index in self.unique_keys)


class Catalog:
    """Reads tables and types through ``connection`` (plain SELECTs, any transaction)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._type_names: dict[int, str] = {}

    def table(self, schema: str, name: str) -> TableInfo | None:
        """The table ``schema.name`` with its columns and keys, or None when there is none."""
        with self.connection.cursor() as cursor:
            cursor.execute(_TABLE, (schema, name))
            found = cursor.fetchone()
            if found is None:
                return None
            oid = int(found[0])
            cursor.execute(_COLUMNS, (oid,))
            rows = cursor.fetchall()
            cursor.execute(_UNIQUE_INDEXES, (oid,))
            indexes = cursor.fetchall()
        columns = tuple(
            Column(
                name=column_name,
                sql_type=sql_type,
                type_name=self.type_name(type_oid),
                not_null=bool(not_null),
                number=int(number),
            )
            for column_name, type_oid, sql_type, not_null, number in rows
        )
        not_null = {column.name for column in columns if column.not_null}
        primary_key = next((tuple(names) for primary, names in indexes if primary), ())
        unique_keys = tuple(tuple(names) for _, names in indexes if set(names) <= not_null)
        return TableInfo(oid, schema, name, columns, primary_key, unique_keys)

    def type_name(self, type_oid: int) -> str:
        """The codec's name for a type: domains resolve to their base type, recursively."""
        cached = self._type_names.get(type_oid)
        if cached is not None:
            return cached
        with self.connection.cursor() as cursor:
            cursor.execute(_TYPE, (type_oid,))
            found = cursor.fetchone()
        if found is None:
            return UNKNOWN_TYPE
        name, kind, base, element = found
        if kind == "d":
            name = self.type_name(base)
        elif name.startswith("_") and element:
            # An array of a domain is an array of the domain's base type.
            name = "_" + self.type_name(element)
        self._type_names[type_oid] = str(name)
        return str(name)


def captured_shape(
    table: configuration_pb2.TableConfiguration,
    info: TableInfo | None,
    *,
    allow_unkeyed: bool,
    database: str,
) -> TableShape:
    """The shape a configured table is captured with; ``database`` is a masked DSN for errors.

    Refuses, naming table and columns: a missing table or column, a key that is
    not NOT NULL and unique, no key when the set does not allow unkeyed tables,
    and captured columns without the key.
    """
    label = f"{table.schema!r}.{table.name!r}"
    if info is None:
        raise ConfigurationError(
            f"table {label} does not exist in database {database!r} (or is not an ordinary table); "
            "create it or remove it from the set"
        )
    for kind, wanted in (("key column", table.key_columns), ("column", table.columns)):
        missing = [column for column in wanted if info.column(column) is None]
        if missing:
            raise ConfigurationError(
                f"table {label} has no {kind} {missing[0]!r}; "
                f"its columns are {list(info.column_names)!r}"
            )
    key = tuple(table.key_columns) or info.primary_key
    if table.key_columns:
        nullable = [name for name in key if not info.column(name).not_null]  # type: ignore[union-attr]
        if nullable:
            raise ConfigurationError(
                f"table {label}: key column(s) {nullable!r} may be NULL; a key must be NOT NULL "
                "(ALTER TABLE ... ALTER COLUMN ... SET NOT NULL) or choose other key_columns"
            )
        if not info.is_unique(key):
            raise ConfigurationError(
                f"table {label}: key columns {list(key)!r} are not covered by a unique index, "
                "so two rows may share a key; create a unique index on them or choose other "
                "key_columns"
            )
    if not key and not allow_unkeyed:
        raise ConfigurationError(
            f"table {label} has no primary key and no key_columns are declared; declare "
            "key_columns, add a primary key, or set allow_unkeyed: true"
        )
    if table.columns:
        missing_keys = [name for name in key if name not in table.columns]
        if missing_keys:
            raise ConfigurationError(
                f"table {label}: the captured columns must include the key column "
                f"{missing_keys[0]!r}; add it to columns"
            )
        wanted_columns = set(table.columns)
        columns = tuple(column for column in info.columns if column.name in wanted_columns)
    else:
        columns = info.columns
    return TableShape(
        schema=table.schema, name=table.name, columns=columns, key=key, relation=info.oid
    )
