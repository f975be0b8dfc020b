"""Snapshot progress records: where a relay killed mid-snapshot goes on."""

from __future__ import annotations

import json

import pytest

from pgshovel.errors import StreamError
from pgshovel.relay.table_topics import Progress, parse_progress


def test_progress_advances_chunk_by_chunk_and_round_trips() -> None:
    start = Progress("public", "items")
    first = start.advanced(("100",), 40)
    assert (first.done, first.next, first.rows, first.chunks) == (False, ("100",), 40, 1)
    assert parse_progress("t", first.to_json()) == first
    last = first.advanced(None, 7)
    assert (last.done, last.next, last.rows, last.chunks) == (True, None, 47, 2)
    assert json.loads(last.to_json())["status"] == "done"
    assert parse_progress("t", last.to_json()) == last


def test_composite_bounds_keep_their_text() -> None:
    progress = Progress("sales", "orders").advanced(("eu", "7"), 1)
    assert parse_progress("t", progress.to_json()).next == ("eu", "7")


def test_a_record_of_an_older_relay_is_a_finished_single_snapshot() -> None:
    value = json.dumps({"schema": "public", "table": "items", "snapshot": "5:9:7", "rows": 3})
    progress = parse_progress("t", value.encode())
    assert progress.done and progress.rows == 3
    assert progress.legacy is not None and progress.legacy.xmin == 5


@pytest.mark.parametrize(
    "value", [b"{", b'{"schema": "public"}', b'{"schema":"a","table":"b","status":"x","rows":1}']
)
def test_a_malformed_record_names_the_topic(value: bytes) -> None:
    with pytest.raises(StreamError, match=r"snapshot record of table topic 'shop\.items'"):
        parse_progress("shop.items", value)
