"""Building a Mutation from a captured event (pgshovel.relay.events, pure part)."""

from __future__ import annotations

import json

import pytest

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.events import QueueEvent, QueueEventDecoder, build_mutation
from pgshovel.relay.schema import HistoryEntry, SchemaTracker
from pgshovel.source import Column, TableInfo

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


OIDS = {"int8": 20, "int4": 23, "numeric": 1700, "text": 25}


class Catalog:
    """The part of ``pgshovel.source.Catalog`` the decoder reads, from dicts."""

    def __init__(self, tables: dict[tuple[str, str], dict[str, str]]) -> None:
        self.tables = tables
        self.lookups: list[tuple[str, str]] = []

    def table(self, schema: str, name: str) -> TableInfo | None:
        self.lookups.append((schema, name))
        types = self.tables.get((schema, name))
        if types is None:
            return None
        columns = tuple(
            Column(column, type_name, type_name, number=index + 1)
            for index, (column, type_name) in enumerate(types.items())
        )
        return TableInfo(99, schema, name, columns, ("id",), (("id",),))

    def type_name(self, oid: int) -> str:
        return {value: key for key, value in OIDS.items()}.get(oid, "unknown")


class History:
    """The schema history the event trigger keeps, in memory."""

    def __init__(self, entries: list[HistoryEntry] | None = None) -> None:
        self.entries = entries or []

    def before(self, event_id: int, schema: str, table: str) -> HistoryEntry | None:
        found = [
            e
            for e in self.entries
            if (e.schema, e.table) == (schema, table) and e.event_id < event_id
        ]
        return found[-1] if found else None

    def _relation(self, entry: HistoryEntry) -> int:
        return int(json.loads(entry.data)["relation"])

    def relation_before(self, event_id: int, relation: int) -> HistoryEntry | None:
        found = [e for e in self.entries if self._relation(e) == relation and e.event_id < event_id]
        return found[-1] if found else None

    def relation_after(self, event_id: int, relation: int) -> list[HistoryEntry]:
        return [e for e in self.entries if self._relation(e) == relation and e.event_id > event_id]


def _decoder(
    tables: dict[tuple[str, str], dict[str, str]], history: History | None = None
) -> tuple[QueueEventDecoder, Catalog]:
    catalog = Catalog(tables)
    tracker = SchemaTracker(catalog, history or History(), "sales")  # type: ignore[arg-type]
    return QueueEventDecoder(tracker), catalog


UPDATE = '[{"note": "a", "id": "1", "price": "1.50"}, {"note": null, "id": "2", "price": "NaN"}]'


def test_decoding_into_a_message_equals_building_the_mutation() -> None:
    event = _event("U", UPDATE)
    decoder, catalog = _decoder({("Sales", "Or ders"): TYPES})
    message = stream_pb2.Message()
    decoder.decode_into(tuple(event), message)
    expected = build_mutation(event, json.loads(UPDATE), TYPES, ["id"])
    assert message.operation.mutation == expected
    assert decoder(tuple(event)) == expected
    assert decoder.decode(event) == expected
    assert catalog.lookups == [("Sales", "Or ders")]  # the catalog is read once per table


def test_without_history_a_column_added_since_the_catalog_was_read_is_looked_up_again() -> None:
    decoder, catalog = _decoder({("Sales", "Or ders"): TYPES})
    decoder.decode(_event("I", '[null, {"id": "1"}]'))
    catalog.tables[("Sales", "Or ders")] = {**TYPES, "added": "int4"}
    mutation = decoder.decode(_event("I", '[null, {"id": "2", "added": "7"}]'))
    assert [(c.name, c.value.WhichOneof("kind")) for c in mutation.new.columns] == [
        ("id", "int64"),
        ("added", "int64"),
    ]
    assert len(catalog.lookups) == 2


def test_a_bad_value_is_a_codec_error_naming_type_and_text() -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): TYPES})
    with pytest.raises(CodecError, match=r"cannot decode numeric text '1,5'"):
        decoder.decode(_event("I", '[null, {"id": "1", "price": "1,5"}]'))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("[null", "not JSON"),
        ('{"id": "1"}', r"expected \[old, new\]"),
        ('[null, ["1"]]', "objects or nulls"),
    ],
)
def test_data_no_capture_trigger_writes_is_a_codec_error(data: str, problem: str) -> None:
    with pytest.raises(CodecError, match=problem):
        _decoder({})[0].decode(_event("I", data))
