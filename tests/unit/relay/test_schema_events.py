"""Schema events: each table's events decode with the shape announced last before them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.events import QueueEventDecoder
from pgshovel.relay.schema import HistoryEntry, SchemaTracker
from tests.unit.relay.test_events import OIDS, Catalog, History

SchemaChange = stream_pb2.SchemaChange
RELATION = 4242


def column(
    name: str, number: int, type_name: str, sql_type: str = "", **facts: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "number": number,
        "type_oid": OIDS[type_name],
        "sql_type": sql_type or type_name,
        "not_null": name == "id",
        "has_default": facts.get("has_default", False),
        "has_missing": "missing" in facts,
        "missing": facts.get("missing"),
        "generated": facts.get("generated", False),
    }


def facts(kind: str, columns: list[dict[str, Any]], **extra: Any) -> str:
    return json.dumps(
        {
            "kind": kind,
            "command": extra.get("command", "ALTER TABLE"),
            "relation": RELATION,
            "rewritten": extra.get("rewritten", False),
            "columns": columns,
            "indexes": [{"primary": True, "columns": ["id"]}],
            "captured": extra.get("captured"),
            "key_columns": extra.get("key_columns", ["id"]),
            "disabled": extra.get("disabled", []),
            "uncaptured": extra.get("uncaptured", False),
        }
    )


V1 = [column("id", 1, "int4"), column("a", 2, "int4"), column("s", 3, "text")]


def event(event_id: int, kind: str, data: str, table: str = "t") -> tuple[Any, ...]:
    return (event_id, 1_700_000_000_000_000, 900, kind, data, "public", table, "v1", '["id"]')


def insert(event_id: int, row: dict[str, str | None], table: str = "t") -> tuple[Any, ...]:
    return event(event_id, "I", json.dumps([None, row]), table)


def decode(decoder: QueueEventDecoder, item: tuple[Any, ...]) -> stream_pb2.Message:
    message = stream_pb2.Message()
    decoder.decode_into(item, message)
    return message


def _decoder(history: list[HistoryEntry] | None = None) -> QueueEventDecoder:
    catalog = Catalog({("public", "t"): {"id": "int8", "a": "int8", "s": "text"}})
    return QueueEventDecoder(SchemaTracker(catalog, History(history), "sales"))  # type: ignore[arg-type]


def test_an_announcement_becomes_a_schema_change_with_the_shape() -> None:
    decoder = _decoder()
    change = decode(decoder, event(1, "S", facts("announce", V1, command="pgshovel set create")))
    sc = change.operation.schema_change
    assert sc.kind == SchemaChange.ANNOUNCE
    assert (sc.schema, sc.table, sc.relation, sc.command) == (
        "public",
        "t",
        RELATION,
        "pgshovel set create",
    )
    assert [(c.name, c.number, c.type_name) for c in sc.shape.columns] == [
        ("id", 1, "int4"),
        ("a", 2, "int4"),
        ("s", 3, "text"),
    ]
    assert list(sc.shape.key) == ["id"]
    assert not sc.rewrites_rows and not sc.problem


def test_events_after_an_alter_type_decode_with_the_new_type() -> None:
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1)))
    widened = [column("id", 1, "int4"), column("a", 2, "int8", "bigint"), column("s", 3, "text")]
    change = decode(decoder, event(2, "S", facts("alter", widened))).operation.schema_change
    assert not change.rewrites_rows, "int4 -> int8 is a plain cast the copy can replay"
    mutation = decode(decoder, insert(3, {"id": "1", "a": "9999999999", "s": "x"}))
    assert mutation.operation.mutation.new.columns[1].value.int64 == 9_999_999_999


def test_an_added_column_carries_the_value_existing_rows_got() -> None:
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1)))
    added = [*V1, column("b", 4, "numeric", has_default=True, missing="{1.50}")]
    change = decode(decoder, event(2, "S", facts("alter", added))).operation.schema_change
    assert [(c.name, c.value.decimal) for c in change.added_defaults] == [("b", "1.50")]
    assert not change.rewrites_rows


def test_a_volatile_default_or_using_rewrites_rows() -> None:
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1)))
    volatile = [*V1, column("r", 4, "int4", has_default=True)]
    assert decode(
        decoder, event(2, "S", facts("alter", volatile))
    ).operation.schema_change.rewrites_rows
    using = decode(decoder, event(3, "S", facts("alter", volatile, rewritten=True)))
    assert using.operation.schema_change.rewrites_rows
    to_int = [
        column("id", 1, "int4"),
        column("a", 2, "int4"),
        column("s", 3, "int4", "integer"),
        volatile[3],
    ]
    text_to_int = decode(decoder, event(4, "S", facts("alter", to_int))).operation.schema_change
    assert text_to_int.rewrites_rows, "text -> integer is not a cast the copy replays"


def test_a_renamed_listed_column_stops_the_relay_naming_table_and_remedy() -> None:
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1, captured=["id", "s"])))
    renamed = [column("id", 1, "int4"), column("a", 2, "int4"), column("s2", 3, "text")]
    with pytest.raises(SchemaError) as raised:
        decode(decoder, event(2, "S", facts("alter", renamed, captured=["id", "s"])))
    message = str(raised.value)
    assert "'public'.'t'" in message and "no column 's'" in message
    assert "pgshovel-admin set update sales" in message


def test_a_problem_already_remedied_by_set_update_is_published_in_order() -> None:
    renamed = [column("id", 1, "int4"), column("a", 2, "int4"), column("s2", 3, "text")]
    remedy = facts("announce", renamed, captured=["id", "s2"], command="pgshovel set update")
    decoder = _decoder([HistoryEntry(5, "public", "t", remedy)])
    decode(decoder, event(1, "S", facts("announce", V1, captured=["id", "s"])))
    problem = decode(decoder, event(2, "S", facts("alter", renamed, captured=["id", "s"])))
    assert "no column 's'" in problem.operation.schema_change.problem
    assert not problem.operation.schema_change.HasField("shape")
    fixed = decode(decoder, event(5, "S", remedy)).operation.schema_change
    assert [c.name for c in fixed.shape.columns] == ["id", "s2"]
    assert fixed.rewrites_rows, "a column newly captured: the copy reads the table again"


def test_disabled_capture_stops_the_relay_naming_the_triggers_and_how_to_enable_them() -> None:
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1)))
    off = ["pgshovel_c_sales.insert", "pgshovel_c_sales_truncate"]
    with pytest.raises(SchemaError) as raised:
        decode(decoder, event(2, "S", facts("alter", V1, disabled=off)))
    message = str(raised.value)
    assert "'public'.'t'" in message and "is disabled" in message
    assert (
        'ALTER TABLE "public"."t" ENABLE TRIGGER "pgshovel_c_sales.insert"; '
        'ALTER TABLE "public"."t" ENABLE TRIGGER "pgshovel_c_sales_truncate"'
    ) in message


def test_capture_enabled_again_makes_the_copy_read_the_table_again() -> None:
    enabled = facts("alter", V1)
    decoder = _decoder([HistoryEntry(9, "public", "t", enabled)])
    decode(decoder, event(1, "S", facts("announce", V1)))
    problem = decode(decoder, event(2, "S", facts("alter", V1, disabled=["pgshovel_c_sales"])))
    assert "is disabled" in problem.operation.schema_change.problem
    again = decode(decoder, event(9, "S", enabled)).operation.schema_change
    assert not again.problem and again.rewrites_rows, "rows written meanwhile: read it again"


def test_a_table_created_again_without_triggers_stops_the_relay_until_set_update() -> None:
    recreated = json.dumps({"kind": "alter", "command": "CREATE TABLE", "relation": 77})
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1)))
    decode(decoder, event(2, "S", json.dumps({"kind": "drop", "relation": RELATION})))
    with pytest.raises(SchemaError) as raised:
        decode(decoder, event(3, "S", json.dumps({**json.loads(recreated), "uncaptured": True})))
    message = str(raised.value)
    assert "'public'.'t'" in message and "created again" in message
    assert "'pgshovel-admin set update sales FILE'" in message


def test_first_sight_uses_the_history_before_the_event_not_the_catalog() -> None:
    v2 = [column("id", 1, "int4"), column("a", 2, "int8", "bigint"), column("s", 3, "text")]
    history = [
        HistoryEntry(1, "public", "t", facts("announce", V1)),
        HistoryEntry(10, "public", "t", facts("alter", v2)),
    ]
    decoder = _decoder(history)
    early = decode(decoder, insert(5, {"id": "1", "a": "7", "s": "x"})).operation.mutation
    assert early.new.columns[0].value.int64 == 1
    with pytest.raises(Exception, match="cannot decode int4 text '9999999999'"):
        decode(decoder, insert(6, {"id": "2", "a": "9999999999", "s": "x"}))


def test_a_renamed_table_keeps_its_shape() -> None:
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1)))
    change = decode(decoder, event(2, "S", facts("alter", V1), table="u")).operation.schema_change
    assert (change.table, change.relation) == ("u", RELATION)
    assert not change.rewrites_rows
    mutation = decode(decoder, insert(3, {"id": "1", "a": "2", "s": "x"}, table="u"))
    assert mutation.operation.mutation.table == "u"


def test_a_row_with_columns_outside_its_shape_is_an_error_not_a_guess() -> None:
    decoder = _decoder()
    decode(decoder, event(1, "S", facts("announce", V1)))
    with pytest.raises(SchemaError, match=r"columns \['ghost'\]"):
        decode(decoder, insert(2, {"id": "1", "ghost": "x"}))
    # The shape is checked before any value: a bad value does not hide the mismatch.
    with pytest.raises(SchemaError, match=r"columns \['ghost'\]"):
        decode(decoder, insert(3, {"id": "one", "ghost": "x"}))


def test_a_watermark_passes_through() -> None:
    message = decode(_decoder(), event(7, "W", "req:3:low"))
    assert message.operation.watermark.request == "req:3:low"
    assert message.operation.watermark.id == 7
