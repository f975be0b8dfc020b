"""The window of a table-topic chunk: which keys the stream changed, which rows go out."""

from __future__ import annotations

import re
from typing import cast

from hypothesis import given
from hypothesis import strategies as st

from pgshovel.relay.table_topics import WindowTracker, relay_attempt_prefix, surviving
from pgshovel.replication.incremental import attempt_prefix

ITEMS = ("public", "items")
OTHER = ("public", "other")


def batch(tracker: WindowTracker, *operations: tuple[str, object]) -> list[str]:
    """Frame one batch of operations; the attempts whose window closed."""
    tracker.begin()
    for kind, value in operations:
        if kind == "mark":
            tracker.watermark(str(value))
        elif kind == "key":
            table, keys = cast(tuple[tuple[str, str], set[bytes]], value)
            tracker.changed(table, keys)
        elif kind == "truncate":
            tracker.whole(value)  # type: ignore[arg-type]
    return [flight.attempt for flight in tracker.commit()]


def test_keys_of_whole_batches_from_the_low_to_the_high_watermark_count() -> None:
    tracker = WindowTracker()
    flight = tracker.open("relay-a.1", ITEMS)
    assert batch(tracker, ("key", (ITEMS, {b"1"}))) == []  # before the low watermark's batch
    # The low watermark's batch counts whole, events before the mark included.
    assert batch(tracker, ("key", (ITEMS, {b"2"})), ("mark", "relay-a.1:low")) == []
    assert batch(tracker, ("key", (ITEMS, {b"3"})), ("key", (OTHER, {b"4"}))) == []
    ready = batch(tracker, ("mark", "relay-a.1:high"), ("key", (ITEMS, {b"5"})))
    assert ready == ["relay-a.1"]
    assert flight.changed == {b"2", b"3", b"5"}
    assert not flight.invalid
    # Closed: later batches change nothing.
    assert batch(tracker, ("key", (ITEMS, {b"6"}))) == []
    assert flight.changed == {b"2", b"3", b"5"}


def test_low_and_high_watermark_in_one_batch() -> None:
    tracker = WindowTracker()
    flight = tracker.open("relay-a.2", ITEMS)
    ready = batch(
        tracker,
        ("key", (ITEMS, {b"1"})),
        ("mark", "relay-a.2:low"),
        ("mark", "relay-a.2:high"),
        ("key", (ITEMS, {b"7"})),
    )
    assert ready == ["relay-a.2"] and flight.changed == {b"1", b"7"}


def test_a_truncate_in_the_window_makes_the_chunk_stale() -> None:
    tracker = WindowTracker()
    flight = tracker.open("relay-a.3", ITEMS)
    batch(tracker, ("mark", "relay-a.3:low"))
    batch(tracker, ("truncate", ITEMS))
    assert batch(tracker, ("mark", "relay-a.3:high")) == ["relay-a.3"]
    assert "truncated" in flight.invalid


def test_a_truncate_before_the_window_does_not() -> None:
    tracker = WindowTracker()
    flight = tracker.open("relay-a.4", ITEMS)
    batch(tracker, ("truncate", ITEMS))
    batch(tracker, ("mark", "relay-a.4:low"), ("mark", "relay-a.4:high"))
    assert not flight.invalid


def test_a_rolled_back_batch_counts_when_it_comes_again() -> None:
    tracker = WindowTracker()
    flight = tracker.open("relay-a.5", ITEMS)
    tracker.begin()
    tracker.watermark("relay-a.5:low")
    tracker.changed(ITEMS, {b"1"})
    tracker.rollback()
    assert not flight.opened
    assert batch(tracker, ("mark", "relay-a.5:low"), ("key", (ITEMS, {b"1"}))) == []
    assert flight.opened and flight.changed == {b"1"}


def test_watermarks_of_others_and_of_dropped_flights_match_nothing() -> None:
    tracker = WindowTracker()
    flight = tracker.open("relay-a.6", ITEMS)
    worker = attempt_prefix("c", "s") + "task.0.abcdef"
    assert batch(tracker, ("mark", f"{worker}:low"), ("mark", f"{worker}:high")) == []
    assert not flight.opened
    tracker.drop("relay-a.6")
    assert batch(tracker, ("mark", "relay-a.6:low"), ("mark", "relay-a.6:high")) == []


def test_keys_of_unwatched_tables_are_not_kept() -> None:
    tracker = WindowTracker()
    tracker.begin()
    tracker.changed(ITEMS, {b"1"})
    assert not tracker.watches(ITEMS)
    flight = tracker.open("relay-a.7", ITEMS)
    batch(tracker, ("mark", "relay-a.7:low"), ("mark", "relay-a.7:high"))
    assert flight.changed == set()


def test_the_relay_names_its_attempts_unlike_any_worker() -> None:
    prefix = relay_attempt_prefix("default", "shop")
    assert re.fullmatch(r"relay-[0-9a-f]{6}", prefix)
    assert prefix != relay_attempt_prefix("default", "other")
    # The worker's attempts start with its hexadecimal prefix: never with "relay-".
    assert not (attempt_prefix("default", "shop") + "x").startswith("relay-")


@given(
    st.lists(st.tuples(st.binary(max_size=3), st.integers()), max_size=30),
    st.sets(st.binary(max_size=3), max_size=10),
)
def test_surviving_rows_are_those_unchanged_in_order(
    rows: list[tuple[bytes, int]], changed: set[bytes]
) -> None:
    kept = surviving(rows, changed)
    assert kept == [row for row in rows if row[0] not in changed]
    assert not {key for key, _ in kept} & changed


def test_a_high_watermark_without_its_low_one_makes_the_chunk_stale() -> None:
    tracker = WindowTracker()
    flight = tracker.open("relay-a.8", ITEMS)
    assert batch(tracker, ("key", (ITEMS, {b"1"})), ("mark", "relay-a.8:high")) == ["relay-a.8"]
    assert flight.invalid == "its low watermark was not seen"


def test_the_relay_follows_the_watermark_names_a_chunk_reader_writes() -> None:
    # One spelling for the reader (pgshovel.source.read_chunk writes chunk.low / chunk.high)
    # and for both followers of the stream (this tracker, the worker's incremental snapshots).
    from pgshovel.source import Chunk, KeyRange, TableShape

    table = TableShape("public", "items", (), ("id",))
    chunk = Chunk("relay-a.7", "queue", KeyRange(table, 0, None, None))
    tracker = WindowTracker()
    flight = tracker.open(chunk.attempt, ITEMS)
    assert (flight.low, flight.high) == (chunk.low, chunk.high)
    assert batch(tracker, ("mark", chunk.low), ("mark", chunk.high)) == ["relay-a.7"]
