"""Which shape a configured table is captured with, and every refusal naming table and columns."""

from __future__ import annotations

import pytest

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.source import Column, TableInfo, TableShape, captured_shape

ID = Column("id", "bigint", "int8", not_null=True, number=1)
STATUS = Column("status", "text", "text", number=2)
CODE = Column("code", "text", "text", not_null=True, number=3)
NOTE = Column("note", "text", "text", number=4)

INFO = TableInfo(
    oid=1,
    schema="public",
    name="orders",
    columns=(ID, STATUS, CODE, NOTE),
    primary_key=("id",),
    unique_keys=(("id",), ("code",)),
)


def _table(**fields: object) -> configuration_pb2.TableConfiguration:
    return configuration_pb2.TableConfiguration(schema="public", name="orders", **fields)  # type: ignore[arg-type]


def _shape(
    table: configuration_pb2.TableConfiguration,
    info: TableInfo | None = INFO,
    allow_unkeyed: bool = False,
) -> TableShape:
    return captured_shape(table, info, allow_unkeyed=allow_unkeyed, database="x")


def test_the_primary_key_is_the_default_key_and_every_column_is_captured() -> None:
    shape = _shape(_table())
    assert shape.key == ("id",)
    assert shape.columns == (ID, STATUS, CODE, NOTE)


def test_listed_columns_keep_table_order() -> None:
    assert _shape(_table(columns=["note", "id"])).column_names == ("id", "note")


def test_a_missing_table_is_named_with_its_database() -> None:
    with pytest.raises(ConfigurationError, match=r"'public'\.'orders' does not exist in database"):
        _shape(_table(), None)


def test_unknown_columns_are_named() -> None:
    with pytest.raises(ConfigurationError, match="no column 'price'"):
        _shape(_table(columns=["id", "price"]))
    with pytest.raises(ConfigurationError, match="no key column 'sku'"):
        _shape(_table(key_columns=["sku"]))


def test_unkeyed_tables_are_refused_unless_allowed() -> None:
    unkeyed = TableInfo(2, "public", "orders", (STATUS,), (), ())
    with pytest.raises(ConfigurationError, match=r"'orders' has no primary key.*allow_unkeyed"):
        _shape(_table(), unkeyed)
    assert _shape(_table(), unkeyed, allow_unkeyed=True).key == ()


def test_captured_columns_must_include_the_key() -> None:
    with pytest.raises(ConfigurationError, match="include the key column 'id'"):
        _shape(_table(columns=["status"]))


def test_a_declared_key_on_a_not_null_unique_index_is_accepted() -> None:
    assert _shape(_table(key_columns=["code"])).key == ("code",)
    # A superset of a unique index identifies rows too.
    assert _shape(_table(key_columns=["code", "id"])).key == ("code", "id")


def test_a_nullable_key_is_refused_naming_table_and_columns() -> None:
    with pytest.raises(
        ConfigurationError, match=r"'orders': key column\(s\) \['status'\] may be NULL"
    ):
        _shape(_table(key_columns=["status"]))


def test_a_key_without_a_unique_index_is_refused() -> None:
    info = TableInfo(3, "public", "orders", (ID, CODE), ("id",), (("id",),))
    with pytest.raises(ConfigurationError, match=r"\['code'\] are not covered by a unique index"):
        _shape(_table(key_columns=["code"]), info)
