"""A packed row's run of events framed at once gives the bytes and errors of one by one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import PgshovelError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.event_data import parse_run
from pgshovel.relay.events import QueueEventDecoder
from pgshovel.relay.framing import RUN_EVENTS, RowFramer
from pgshovel.relay.schema import SchemaTracker
from pgshovel.stream._codec_wire import signed, varints
from pgshovel.stream.rows_builder import EncodedRun, RowsBuilder
from tests.unit.relay.test_events import Catalog, History

TYPES = {"id": "int8", "status": "text", "note": "text"}
TABLES = {("public", "t"): TYPES, ("public", "u"): {"id": "int8", "note": "text"}}
TIME = 1_700_000_000_000_000
#: values that take every path of a COPY line: plain, NULL, escaped, not text
NOTES: list[Any] = ["plain", None, "tab\there", "back\\slash", "new\nline", "é✓", "", 7]


@st.composite
def row(draw: st.DrawFn, event_id: int, odd: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"id": str(event_id), "status": draw(st.sampled_from(["a", None]))}
    found["note"] = draw(st.sampled_from(NOTES if odd else NOTES[:-1]))
    if odd and draw(st.integers(0, 9)) == 0:
        del found["status"]  # a column the trigger did not capture
    if odd and draw(st.integers(0, 19)) == 0:
        found["unknown"] = "x"  # a column the shape does not have
    return found


@st.composite
def run(draw: st.DrawFn, first: int, txid: int) -> list[tuple[Any, ...]]:
    """One transaction's events of one table and type, as a packed row expands them."""
    kind = draw(st.sampled_from("IUD"))
    table = draw(st.sampled_from([("public", "t"), ("public", "u")]))
    provenance = draw(st.sampled_from([None, "statement", "each"]))
    odd = draw(st.integers(0, 4)) == 0
    events = []
    for offset in range(draw(st.integers(1, 12))):
        event_id = first + offset
        old = None if kind == "I" else draw(row(event_id, odd))
        new = None if kind == "D" else draw(row(event_id, odd))
        parts: list[Any] = [old, new]
        if provenance == "statement":
            parts.append({"s": "bob", "a": f"app {txid}"} if offset == 0 else 1)
        elif provenance == "each":
            parts.append({"s": draw(st.sampled_from(["bob", "eve"]))})
        data = json.dumps(parts)
        if odd and draw(st.integers(0, 14)) == 0:
            data = draw(st.sampled_from(["", "[null]", "{", "[null, 3]", '[null, {"id": "1"}, 2]']))
        events.append((event_id, TIME + txid, txid, kind, data, *table, "v1", '["id"]'))
    return events


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    events: list[tuple[Any, ...]] = []
    for txid in range(100, 100 + draw(st.integers(1, 6))):
        events.extend(draw(run(len(events) + 1, txid)))
    return events


class OneByOne(RowFramer):
    """The framer taking every event alone (the reference)."""

    def add(self, events: Sequence[tuple[Any, ...]]) -> None:
        self._add_each(events)


def _framed(
    framer_type: type[RowFramer], events: list[tuple[Any, ...]], limit: int, chunk: int
) -> tuple[list[bytes], str | None]:
    """The operations framed for ``events`` (fed ``chunk`` at a time), and the error if any."""
    tracker = SchemaTracker(Catalog(dict(TABLES)), History(), "s")  # type: ignore[arg-type]
    framer = framer_type(QueueEventDecoder(tracker), 1, 1, limit)
    framer.begin(stream_pb2.BatchIdentifier(id=1), stream_pb2.Tick(), stream_pb2.Tick(), "v1")
    framed: list[bytes] = []
    try:
        for start in range(0, len(events), chunk):
            framer.add(events[start : start + chunk])
            framed.extend(message.operation.SerializeToString() for message in framer.take()[0])
        framer.commit()
    except PgshovelError as error:
        return framed, f"{type(error).__name__}: {error}"
    framed.extend(message.operation.SerializeToString() for message in framer.take()[0])
    return framed, None


@settings(deadline=None, max_examples=150)
@given(batches(), st.sampled_from([300, 2_000, 1_000_000]), st.integers(1, 40))
def test_runs_frame_the_bytes_and_errors_of_events_one_by_one(events, limit, chunk):
    assert _framed(RowFramer, events, limit, chunk) == _framed(OneByOne, events, limit, chunk)


def _event(event_id: int, kind: str, table: str, rows: list[Any]) -> tuple[Any, ...]:
    return (event_id, TIME, 5, kind, json.dumps(rows), "public", table, "v1", '["id"]')


def test_an_error_in_a_run_names_its_event_not_the_runs_first() -> None:
    events = [
        _event(10 + n, "I", "t", [None, {"id": str(n), "status": "a", "note": "x"}])
        for n in range(30)
    ]
    events[17] = _event(27, "I", "t", [None, {"id": "17", "status": "a", "note": 3}])
    _, error = _framed(RowFramer, events, 1_000_000, 30)
    assert error is not None and error.startswith("CodecError: event 27 of table 'public'.'t'")
    events[17] = _event(27, "I", "t", [None, {"id": "17", "note": "x"}])
    _, error = _framed(RowFramer, events, 1_000_000, 30)
    assert error is not None and error.startswith("SchemaError: event 27 of table 'public'.'t'")
    assert "lacks column 'status'" in error


def test_a_long_run_is_framed_in_runs_and_messages_end_where_they_would_one_by_one() -> None:
    events = [
        _event(1 + n, "U", "u", [{"id": str(n), "note": ""}, {"id": str(n), "note": "n"}])
        for n in range(3 * RUN_EVENTS + 7)
    ]
    for limit in (5_000, 33_333, 1_000_000):
        framed, error = _framed(RowFramer, events, limit, len(events))
        assert error is None
        assert (framed, error) == _framed(OneByOne, events, limit, len(events))


def test_a_run_that_does_not_fit_leaves_the_builder_as_it_was() -> None:
    table, other = (stream_pb2.RowTable(set_version=v).SerializeToString() for v in "ab")
    builder = RowsBuilder()
    builder.add(table, 1, stream_pb2.Mutation.INSERT, 7, TIME, None, b"1\tx")
    before = (builder.size, builder.count)
    lines = [b"2\t" + b"y" * 400] * 3
    big = EncodedRun(other, stream_pb2.Mutation.INSERT, 7, TIME, [2, 3, 4], None, lines, None)
    assert not builder.add_run(big, limit=1_000)
    assert (builder.size, builder.count) == before
    assert builder.add_run(big, limit=10_000)
    payload = builder.take()
    assert payload is not None
    rows = stream_pb2.MutationBatch.FromString(payload)
    assert [change.id for change in rows.changes] == [1, 2, 3, 4]
    assert [change.table for change in rows.changes] == [0, 1, 1, 1]
    assert rows.count == 4


@pytest.mark.parametrize(
    "data",
    [
        ['[null, {"a": "1"}]', '[{"a": "1"}, {"a": "2"}]'],  # old rows of two kinds
        ['[null, {"a": "1"}]', '[null, {"a": "1"}, {"s": "x"}]'],  # provenance in one only
        ['[null, {"a": "1"}, 2]'],  # not PREVIOUS_PROVENANCE
        ['[null, {"a": "1"}, true]'],
        ['[null, {"a": "1"}]', ""],
        ['[null, {"a": "1"}]', "[null"],
        ['{"a": "1"}'],
        ["[null, null, null, null]"],
    ],
)
def test_data_parse_run_does_not_take_is_left_to_parse_rows(data: list[str | None]) -> None:
    assert parse_run(data) is None


def test_parse_run_splits_the_parts() -> None:
    assert parse_run(['[{"a": "1"}, null, {"s": "x"}]', '[{"a": "2"}, null, 1]']) == (
        ({"a": "1"}, {"a": "2"}),
        None,
        ({"s": "x"}, 1),
    )


@settings(deadline=None, max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 1 << 14),
            st.integers((1 << 14) * 5, (1 << 14) * 6 - 1),
            st.integers(-(1 << 63), (1 << 64) - 1),
        ),
        max_size=30,
    )
)
def test_varints_are_the_signed_varint_of_each(numbers: list[int]) -> None:
    assert varints(numbers) == [signed(number) for number in numbers]
