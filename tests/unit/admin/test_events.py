"""Building a Mutation from a captured event (pgshovel.relay.events, pure part)."""

from __future__ import annotations

import json

import pytest

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.events import QueueEvent, build_mutation

TYPES = {"id": "int8", "price": "numeric", "note": "text"}


def _event(kind: str, data: str) -> QueueEvent:
    return QueueEvent(
        7, 1_700_000_000_123_456, 901, kind, data, "Sales", "Or ders", "abc", '["id"]'
    )


def test_update_carries_old_and_new_in_table_order() -> None:
    event = _event(
        "U",
        '[{"note": "a", "id": "1", "price": "1.50"}, {"note": null, "id": "2", "price": "NaN"}]',
    )
    mutation = build_mutation(event, json.loads(event.data or ""), TYPES, ["id"])
    assert mutation.operation == stream_pb2.Mutation.UPDATE
    assert (mutation.schema, mutation.table, mutation.set_version) == ("Sales", "Or ders", "abc")
    assert (mutation.id, mutation.transaction) == (7, 901)
    assert mutation.timestamp == 1_700_000_000_123_456
    assert list(mutation.key_columns) == ["id"]
    assert [column.name for column in mutation.new.columns] == ["id", "price", "note"]
    assert mutation.old.columns[0].value.int64 == 1
    assert mutation.new.columns[1].value.decimal == "NaN"
    assert mutation.new.columns[2].value.WhichOneof("kind") == "null"


def test_insert_and_truncate_have_only_what_applies() -> None:
    insert = build_mutation(_event("I", '[null, {"id": "5"}]'), [None, {"id": "5"}], TYPES, ["id"])
    assert not insert.HasField("old") and insert.new.columns[0].value.int64 == 5
    truncate = build_mutation(_event("T", "[null,null]"), [None, None], TYPES, ["id"])
    assert truncate.operation == stream_pb2.Mutation.TRUNCATE
    assert not truncate.HasField("old") and not truncate.HasField("new")


def test_a_column_unknown_to_the_catalog_keeps_its_text() -> None:
    mutation = build_mutation(_event("D", ""), [{"gone": "x y"}, None], TYPES, ["id"])
    assert mutation.old.columns[0].name == "gone"
    assert mutation.old.columns[0].value.other.text == "x y"


def test_an_unknown_event_type_is_an_error() -> None:
    with pytest.raises(CodecError, match="type 'X'"):
        build_mutation(_event("X", ""), [None, None], TYPES, [])
