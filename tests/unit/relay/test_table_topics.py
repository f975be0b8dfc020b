"""Table-topic translation: topics, keys, values, tombstones, key changes, Debezium envelopes."""

from __future__ import annotations

import json

import pytest

from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.table_topics import Record, TableTopicTranslator, table_topic
from pgshovel.stream.codec import to_value

M = stream_pb2.Mutation


def _row(**values: str | None) -> stream_pb2.Row:
    return stream_pb2.Row(
        columns=[
            stream_pb2.Column(name=name, value=to_value("int4" if name == "id" else "text", text))
            for name, text in values.items()
        ]
    )


def mutation(
    operation: int,
    old: stream_pb2.Row | None = None,
    new: stream_pb2.Row | None = None,
    *,
    event: int = 1,
    transaction: int = 900,
    table: str = "items",
    schema: str = "public",
    keys: tuple[str, ...] = ("id",),
) -> stream_pb2.Mutation:
    result = M(
        id=event,
        schema=schema,
        table=table,
        operation=operation,  # type: ignore[arg-type]
        key_columns=list(keys),
        timestamp=1_700_000_000_123_456,
        transaction=transaction,
    )
    if old is not None:
        result.old.CopyFrom(old)
    if new is not None:
        result.new.CopyFrom(new)
    return result


def translator(format: str = "json") -> TableTopicTranslator:
    result = TableTopicTranslator("shop", format, name="shop", database="db", clock=lambda: 42)  # type: ignore[arg-type]
    result.begin(7)
    return result


def decoded(records: list[Record]) -> list[tuple[str, object, object]]:
    return [
        (
            record.topic,
            None if record.key is None else json.loads(record.key),
            None if record.value is None else json.loads(record.value),
        )
        for record in records
    ]


def test_topic_names() -> None:
    assert table_topic("shop", "public", "items") == "shop.items"
    assert table_topic("shop", "sales", "items") == "shop.sales.items"
    assert table_topic("", "public", "items") == "items"
    with pytest.raises(SchemaError, match=r"table public\.my table cannot have a table topic"):
        table_topic("shop", "public", "my table")


def test_json_insert_update_delete() -> None:
    t = translator()
    assert decoded(t.translate(mutation(M.INSERT, new=_row(id="1", note="a")))) == [
        ("shop.items", {"id": 1}, {"id": 1, "note": "a"})
    ]
    update = mutation(M.UPDATE, old=_row(id="1", note="a"), new=_row(id="1", note="b"))
    assert decoded(t.translate(update)) == [("shop.items", {"id": 1}, {"id": 1, "note": "b"})]
    delete = mutation(M.DELETE, old=_row(id="1", note="b"))
    assert decoded(t.translate(delete)) == [("shop.items", {"id": 1}, None)]


def test_key_bytes_are_stable() -> None:
    t = translator()
    first = t.translate(mutation(M.INSERT, new=_row(id="5", note="x")))[0]
    second = t.translate(mutation(M.DELETE, old=_row(id="5", note="y")))[0]
    assert first.key == second.key == b'{"id":5}'


def test_json_key_change_deletes_the_old_key_first() -> None:
    change = mutation(M.UPDATE, old=_row(id="1", note="a"), new=_row(id="2", note="a"))
    assert decoded(translator().translate(change)) == [
        ("shop.items", {"id": 1}, None),
        ("shop.items", {"id": 2}, {"id": 2, "note": "a"}),
    ]


def test_unkeyed_tables_have_no_records() -> None:
    insert = mutation(M.INSERT, new=_row(id="1", note="a"), keys=())
    assert translator().translate(insert) == []


def test_truncate_deletes_every_live_key() -> None:
    t = translator()
    truncate = mutation(M.TRUNCATE)
    assert t.is_truncate(truncate)
    live = {b'{"id":1}': b'{"id":1,"note":"a"}', b'{"id":3}': b'{"id":3,"note":"c"}'}
    assert decoded(t.truncated(truncate, live)) == [
        ("shop.items", {"id": 1}, None),
        ("shop.items", {"id": 3}, None),
    ]


def test_debezium_envelopes() -> None:
    t = translator("debezium")
    insert = decoded(t.translate(mutation(M.INSERT, new=_row(id="1", note="a"), event=10)))
    [(topic, key, value)] = insert
    assert (topic, key) == ("shop.items", {"id": 1})
    assert value == {
        "before": None,
        "after": {"id": 1, "note": "a"},
        "source": {
            "version": value["source"]["version"],  # type: ignore[index]
            "connector": "pgshovel",
            "name": "shop",
            "ts_ms": 1_700_000_000_123,
            "snapshot": "false",
            "db": "db",
            "sequence": '["7","10"]',
            "schema": "public",
            "table": "items",
            "txId": 900,
            "lsn": None,
            "xmin": None,
        },
        "op": "c",
        "ts_ms": 42,
        "transaction": {"id": "900", "total_order": 1, "data_collection_order": 1},
    }
    update = mutation(M.UPDATE, old=_row(id="1", note="a"), new=_row(id="1", note="b"))
    [(_, _, value)] = decoded(t.translate(update))
    assert value["op"] == "u" and value["before"] == {"id": 1, "note": "a"}  # type: ignore[index]
    assert value["transaction"]["total_order"] == 2  # type: ignore[index]
    other = mutation(M.INSERT, new=_row(id="9", note="z"), table="other")
    [(_, _, value)] = decoded(t.translate(other))
    assert value["transaction"] == {"id": "900", "total_order": 3, "data_collection_order": 1}  # type: ignore[index]
    delete = decoded(t.translate(mutation(M.DELETE, old=_row(id="1", note="b"))))
    assert [None if v is None else v["op"] for _, _, v in delete] == ["d", None]  # type: ignore[index]
    assert delete[0][2]["before"] == {"id": 1, "note": "b"}  # type: ignore[index]
    assert delete[1][1] == {"id": 1} and delete[1][2] is None


def test_debezium_key_change_is_delete_tombstone_create() -> None:
    change = mutation(M.UPDATE, old=_row(id="1", note="a"), new=_row(id="2", note="a"))
    records = decoded(translator("debezium").translate(change))
    assert [(key, None if value is None else value["op"]) for _, key, value in records] == [  # type: ignore[index]
        ({"id": 1}, "d"),
        ({"id": 1}, None),
        ({"id": 2}, "c"),
    ]


def test_debezium_truncate_uses_the_last_known_row() -> None:
    t = translator("debezium")
    last = t.translate(mutation(M.INSERT, new=_row(id="4", note="d")))[0]
    assert last.value is not None and last.key is not None
    records = decoded(t.truncated(mutation(M.TRUNCATE), {last.key: last.value}))
    assert records[0][2]["op"] == "d"  # type: ignore[index]
    assert records[0][2]["before"] == {"id": 4, "note": "d"}  # type: ignore[index]
    assert records[1][2] is None


def test_transaction_ranks_restart_with_each_batch() -> None:
    t = translator("debezium")
    t.translate(mutation(M.INSERT, new=_row(id="1", note="a")))
    t.begin(8)
    [(_, _, value)] = decoded(t.translate(mutation(M.INSERT, new=_row(id="2", note="a"))))
    assert value["transaction"]["total_order"] == 1  # type: ignore[index]
    assert value["source"]["sequence"] == '["8","1"]'  # type: ignore[index]


def test_snapshot_rows_are_reads_the_last_marked() -> None:
    rows = [_row(id="1", note="a"), _row(id="2", note=None)]
    json_records = list(translator().snapshot_records("public", "items", ["id"], rows, "5:9:7"))
    assert decoded(json_records) == [
        ("shop.items", {"id": 1}, {"id": 1, "note": "a"}),
        ("shop.items", {"id": 2}, {"id": 2, "note": None}),
    ]
    events = decoded(
        list(translator("debezium").snapshot_records("public", "items", ["id"], rows, "5:9:7"))
    )
    assert [value["op"] for _, _, value in events] == ["r", "r"]  # type: ignore[index]
    assert [value["source"]["snapshot"] for _, _, value in events] == ["true", "last"]  # type: ignore[index]
    assert events[0][2]["source"]["sequence"] == '["snapshot","5:9:7"]'  # type: ignore[index]
    assert events[0][2]["transaction"] is None and events[0][2]["before"] is None  # type: ignore[index]
    assert list(translator().snapshot_records("public", "items", ["id"], [], "5:9:")) == []


def test_transaction_topic_begin_and_end_with_counts() -> None:
    t = TableTopicTranslator(
        "shop", "debezium", name="shop", clock=lambda: 42, transaction_topic="shop.transaction"
    )
    t.begin(7)
    first = t.translate(mutation(M.INSERT, new=_row(id="1", note="a"), transaction=900))
    [begin] = decoded(t.take_begins())
    assert begin == (
        "shop.transaction",
        {"id": "900"},
        {
            "status": "BEGIN",
            "id": "900",
            "ts_ms": 42,
            "event_count": None,
            "data_collections": None,
        },
    )
    assert len(first) == 1
    t.translate(mutation(M.DELETE, old=_row(id="1", note="a"), transaction=900))
    t.translate(mutation(M.INSERT, new=_row(id="5", note="z"), transaction=901, table="other"))
    t.translate(mutation(M.INSERT, new=_row(id="6", note="z"), transaction=900, table="other"))
    assert [key for _, key, _ in decoded(t.take_begins())] == [{"id": "901"}]
    ends = decoded(t.batch_end())
    assert [value for _, _, value in ends] == [
        {
            "status": "END",
            "id": "900",
            "ts_ms": 42,
            "event_count": 3,
            "data_collections": [
                {"data_collection": "public.items", "event_count": 2},
                {"data_collection": "public.other", "event_count": 1},
            ],
        },
        {
            "status": "END",
            "id": "901",
            "ts_ms": 42,
            "event_count": 1,
            "data_collections": [{"data_collection": "public.other", "event_count": 1}],
        },
    ]


def test_no_transaction_topic_no_records() -> None:
    t = translator("debezium")
    t.translate(mutation(M.INSERT, new=_row(id="1", note="a")))
    assert t.take_begins() == [] and t.batch_end() == []
