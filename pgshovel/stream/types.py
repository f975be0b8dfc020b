"""The registry of PostgreSQL types with a native kind: the one place a type is declared.

Each ``PgType`` names a base type by its ``pg_type.typname`` (with the SQL
spellings ``format_type`` prints for it as aliases) and declares its facets:
``kind``, the ``stream_pb2.Value`` field it travels as, with what the kind's
parser needs (an integer's bounds, whether a time or timestamp has a zone);
and ``arrow``, the kind of Arrow column the table formats store it as. Every
module that treats types differently builds its own table once at import from
``TYPES``, with one implementation per kind: the codec's fillers
(``_codec_fill``) and encoders (``_codec_encode``), the COPY encoders
(``replication.copyrows``), the Arrow types (``targets._arrow``) and the COPY
text parsers of the table formats (``tables._text``); ``tests/unit/stream/
test_types.py`` checks that each has every kind. Adding a type with an existing
kind is one entry here; a new kind is one entry in each of those tables. Every
type here has an array type, ``_`` + its name; a type not here travels as
``Value.other`` with its text (its array as an array of ``other``). Pure: no
pyarrow, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "ARROW_KINDS",
    "BY_NAME",
    "BY_TYPNAME",
    "TYPES",
    "VALUE_KINDS",
    "ArrowKind",
    "PgType",
    "ValueKind",
    "lookup",
    "names_of",
]

#: The ``stream_pb2.Value`` fields a registered type travels as (arrays, ``other``
#: and ``null`` are not a type's own kind).
ValueKind = Literal[
    "int64",
    "double",
    "decimal",
    "bool",
    "bytes",
    "uuid",
    "json",
    "string",
    "date",
    "time",
    "timestamp",
    "interval",
]
VALUE_KINDS: tuple[ValueKind, ...] = ValueKind.__args__  # type: ignore[attr-defined]

#: How the table formats store a type in Arrow. ``text``: PostgreSQL's text as it
#: is; ``string``: the codec's text of the value (parsed and printed again);
#: ``decimal``: ``decimal128(p, s)`` for ``numeric(p,s)`` with p <= 38, else the
#: text as it is; the others are the Arrow type of that name (``timestamptz``:
#: ``timestamp(us, UTC)``).
ArrowKind = Literal[
    "bool",
    "int16",
    "int32",
    "int64",
    "float32",
    "float64",
    "binary",
    "date32",
    "timestamp",
    "timestamptz",
    "decimal",
    "text",
    "string",
]
ARROW_KINDS: tuple[ArrowKind, ...] = ArrowKind.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PgType:
    """One PostgreSQL base type with a native kind, and how each part of pgshovel holds it."""

    name: str
    kind: ValueKind
    arrow: ArrowKind
    aliases: tuple[str, ...] = ()
    #: The inclusive range of an ``int64`` type.
    bounds: tuple[int, int] | None = None
    #: Whether a ``time`` or ``timestamp`` type carries a zone (timetz, timestamptz).
    with_zone: bool = False

    def integer_range(self) -> tuple[int, int]:
        """The inclusive range of an ``int64`` type."""
        if self.bounds is None:
            raise TypeError(f"type {self.name!r} of kind {self.kind!r} has no integer range")
        return self.bounds


def _integer(name: str, bits: int, arrow: ArrowKind, *aliases: str) -> PgType:
    bounds = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return PgType(name, "int64", arrow, aliases, bounds=bounds)


TYPES: tuple[PgType, ...] = (
    _integer("int2", 16, "int16", "smallint"),
    _integer("int4", 32, "int32", "integer", "int"),
    _integer("int8", 64, "int64", "bigint"),
    PgType("oid", "int64", "int64", bounds=(0, 2**32 - 1)),
    PgType("float4", "double", "float32", ("real",)),
    PgType("float8", "double", "float64", ("double precision",)),
    PgType("numeric", "decimal", "decimal", ("decimal",)),
    PgType("bool", "bool", "bool", ("boolean",)),
    PgType("bytea", "bytes", "binary"),
    PgType("uuid", "uuid", "string"),
    PgType("json", "json", "text"),
    PgType("jsonb", "json", "text"),
    PgType("date", "date", "date32"),
    PgType("time", "time", "string", ("time without time zone",)),
    PgType("timetz", "time", "string", ("time with time zone",), with_zone=True),
    PgType("timestamp", "timestamp", "timestamp", ("timestamp without time zone",)),
    PgType(
        "timestamptz", "timestamp", "timestamptz", ("timestamp with time zone",), with_zone=True
    ),
    PgType("interval", "interval", "string"),
    PgType("text", "string", "text"),
    PgType("varchar", "string", "text", ("character varying",)),
    PgType("bpchar", "string", "text", ("character",)),
    PgType("name", "string", "text"),
    PgType("char", "string", "text", ('"char"',)),
)

#: Every registered type by its typname (``Column.type_name``, what the codec keys by).
BY_TYPNAME: Mapping[str, PgType] = MappingProxyType({pg_type.name: pg_type for pg_type in TYPES})
#: Every registered type by its typname and by each of its aliases.
BY_NAME: Mapping[str, PgType] = MappingProxyType(
    {
        **{alias: pg_type for pg_type in TYPES for alias in pg_type.aliases},
        **BY_TYPNAME,
    }
)


def lookup(name: str) -> PgType | None:
    """The registered type of a typname (``int4``) or SQL alias (``integer``), or None."""
    return BY_NAME.get(name)


def names_of(kind: ValueKind) -> tuple[str, ...]:
    """The typnames of the registered types travelling as ``kind``, in registry order."""
    return tuple(pg_type.name for pg_type in TYPES if pg_type.kind == kind)
