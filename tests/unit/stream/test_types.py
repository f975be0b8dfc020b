"""The type registry: every registered type has every facet, and no module keeps its own list."""

from __future__ import annotations

import inspect
import re
from collections.abc import Collection
from types import ModuleType

import pytest

from pgshovel.protocol import stream_pb2
from pgshovel.replication import copyrows
from pgshovel.replication.tables import _text
from pgshovel.replication.targets import _arrow
from pgshovel.source import Column
from pgshovel.stream import _codec_encode, _codec_fill, _codec_python, _codec_scalar, codec
from pgshovel.stream.types import (
    ARROW_KINDS,
    BY_NAME,
    BY_TYPNAME,
    TYPES,
    VALUE_KINDS,
    PgType,
    lookup,
    names_of,
)

NAMES = {pg_type.name for pg_type in TYPES}
# The tables keyed by the kind a type travels as, and by the kind Arrow stores it as.
BY_VALUE_KIND: dict[str, Collection[str]] = {
    "codec fillers": _codec_fill.FILL_BY_KIND,
    "codec encoders": _codec_encode.ENCODE_BY_KIND,
    "copy encoders": copyrows.COPY_BY_KIND,
    "codec text": codec._ENCODERS,
    "python values": _codec_python._CONVERTERS,
}
BY_ARROW_KIND: dict[str, Collection[str]] = {
    "arrow types": _arrow.ARROW_BY_KIND,
    "text parsers": _text.TEXT_BY_KIND,
}


def test_the_value_kinds_are_the_protocols() -> None:
    fields = {field.name for field in stream_pb2.Value.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert set(VALUE_KINDS) == fields - {"null", "array", "other"}
    assert {pg_type.kind for pg_type in TYPES} == set(VALUE_KINDS)


@pytest.mark.parametrize("table", sorted(BY_VALUE_KIND))
def test_every_value_kind_has_its_entry(table: str) -> None:
    missing = set(VALUE_KINDS) - set(BY_VALUE_KIND[table])
    assert not missing, f"{table} lack the kinds {sorted(missing)}"


@pytest.mark.parametrize("table", sorted(BY_ARROW_KIND))
def test_every_arrow_kind_has_its_entry_and_no_other(table: str) -> None:
    assert set(BY_ARROW_KIND[table]) == set(ARROW_KINDS)


def test_every_registered_type_has_every_facet() -> None:
    for pg_type in TYPES:
        assert callable(codec.filler_for(pg_type.name)), pg_type
        assert callable(codec.encoder_for(pg_type.name)), pg_type
        assert callable(copyrows.encoder_for(pg_type.name)), pg_type
        assert pg_type.arrow in _arrow.ARROW_BY_KIND, pg_type
        assert pg_type.arrow in _text.TEXT_BY_KIND, pg_type
        assert (pg_type.kind == "int64") == (pg_type.bounds is not None), pg_type
        assert not pg_type.with_zone or pg_type.kind in ("time", "timestamp"), pg_type


def test_the_modules_tables_hold_exactly_the_registered_types() -> None:
    assert codec.known_types() == NAMES | {"_" + name for name in NAMES}
    assert set(copyrows._ENCODERS) == NAMES
    assert set(_text._CONVERTERS) == NAMES
    # The types Arrow stores natively, as before the registry.
    assert set(_arrow._BY_KIND) == {
        "bool",
        "int2",
        "int4",
        "int8",
        "oid",
        "float4",
        "float8",
        "bytea",
        "date",
        "timestamp",
        "timestamptz",
    }


def test_the_old_lists_are_gone() -> None:
    gone = [
        (_codec_scalar, "INTEGER_RANGES"),
        (_codec_fill, "STRING_TYPES"),
        (copyrows, "_TEXT_TYPES"),
        (_text, "_VERBATIM"),
        (_text, "_INTEGERS"),
        (_text, "_FLOATS"),
    ]
    assert [name for module, name in gone if hasattr(module, name)] == []


# A cast rule between two types, not a type's declaration.
_ALLOWED = {_arrow: {"varchar"}}


@pytest.mark.parametrize(
    "module", [_codec_scalar, _codec_fill, _codec_encode, codec, copyrows, _arrow, _text]
)
def test_no_module_names_a_registered_type_itself(module: ModuleType) -> None:
    # Names that are also a kind (timestamp, text, ...) key the per-kind tables.
    own = NAMES - set(VALUE_KINDS) - set(ARROW_KINDS) - _ALLOWED.get(module, set())
    source = inspect.getsource(module)
    named = {name for name in own if re.search(rf"[\"']{re.escape(name)}[\"']", source)}
    assert named == set()


def test_aliases_resolve_to_their_type_and_never_shadow_a_typname() -> None:
    assert lookup("integer") is lookup("int4") is BY_TYPNAME["int4"]
    assert lookup("timestamp with time zone") is BY_TYPNAME["timestamptz"]
    assert lookup("character varying") is BY_TYPNAME["varchar"]
    assert lookup("inet") is None
    aliases = [alias for pg_type in TYPES for alias in pg_type.aliases]
    assert len(aliases) == len(set(aliases))
    assert not set(aliases) & NAMES
    assert len(BY_NAME) == len(NAMES) + len(aliases)


def test_names_of_a_kind_and_integer_ranges() -> None:
    assert names_of("int64") == ("int2", "int4", "int8", "oid")
    assert names_of("string") == ("text", "varchar", "bpchar", "name", "char")
    assert BY_TYPNAME["int2"].integer_range() == (-(2**15), 2**15 - 1)
    assert BY_TYPNAME["oid"].integer_range() == (0, 2**32 - 1)
    with pytest.raises(TypeError, match="has no integer range"):
        BY_TYPNAME["text"].integer_range()


def test_a_known_types_codec_is_built_once_not_per_lookup() -> None:
    # The hot paths take the functions the tables were built with at import.
    for name in ("int8", "timestamptz", "text", "_int4"):
        assert codec.encoder_for(name) is codec.encoder_for(name)
        assert codec.filler_for(name) is codec.filler_for(name)
        assert copyrows.encoder_for(name) is copyrows.encoder_for(name)


def test_a_type_of_a_known_kind_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    # What adding a type costs: its entry; the tables built from the registry all have it.
    added = PgType("xid", "int64", "int64", bounds=(0, 2**32 - 1))
    for module in (_codec_fill, _codec_encode):
        monkeypatch.setattr(module, "TYPES", (*TYPES, added))
    fillers = _codec_fill.build_fillers()
    encoders = _codec_encode.build_encoders(fillers)
    assert {"xid", "_xid"} <= set(fillers) & set(encoders)
    value = stream_pb2.Value()
    fillers["xid"](value, "4294967295")
    assert value.int64 == 2**32 - 1
    assert encoders["xid"]("4294967295") == value.SerializeToString()
    with pytest.raises(ValueError, match="out of range"):
        encoders["xid"]("-1")
    assert copyrows.COPY_BY_KIND[added.kind] is copyrows.encoder_for("int8")
    assert _arrow.ARROW_BY_KIND[added.arrow].type == _arrow.arrow_type(
        Column(name="c", sql_type="bigint", type_name="int8")
    )
    assert _text.TEXT_BY_KIND[added.arrow] is _text._CONVERTERS["int8"]
