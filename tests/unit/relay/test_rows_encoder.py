"""Events encoded as ROWS row changes read back as the Mutations the MUTATIONS encoding sends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.events import QueueEvent
from pgshovel.relay.rows import RowsEncoder
from pgshovel.relay.schema import SchemaTracker
from pgshovel.stream.provenance import ProvenanceResolver
from pgshovel.stream.rows import (
    RowsBuilder,
    copy_field,
    copy_line,
    line_partitions,
    partition_of,
    split_line,
    to_mutations,
)
from tests.unit.relay.test_encode_events import MIXED, _texts
from tests.unit.relay.test_events import Catalog, History, _decoder

TABLE = ("Sales", "Or ders")


@st.composite
def full_rows(draw: st.DrawFn) -> dict[str, str | None]:
    return {
        name: None
        if draw(st.integers(0, 5)) == 0
        else draw(_texts(name if name == "note" else type_name))
        for name, type_name in MIXED.items()
    }


def _event(kind: str, old: Any, new: Any, event_id: int, provenance: Any = None) -> QueueEvent:
    rows = [old, new] if provenance is None else [old, new, provenance]
    return QueueEvent(
        event_id,
        1_700_000_000_000_000 + event_id,
        900,
        kind,
        json.dumps(rows),
        *TABLE,
        "v9",
        '["id"]',
    )


def _encoder(partitions: int = 1) -> RowsEncoder:
    tracker = SchemaTracker(Catalog({TABLE: MIXED}), History(), "sales")  # type: ignore[arg-type]
    return RowsEncoder(tracker, partitions)


def _through_rows(encoder: RowsEncoder, events: list[QueueEvent]) -> list[stream_pb2.Mutation]:
    builder = RowsBuilder()
    for event in events:
        builder.add_change(encoder.encode(tuple(event)))
    payload = builder.take()
    assert payload is not None
    return list(to_mutations(stream_pb2.MutationBatch.FromString(payload)))


@settings(deadline=None, max_examples=60)
@given(
    st.lists(st.tuples(st.sampled_from("IUD"), full_rows(), full_rows()), min_size=1, max_size=6)
)
def test_row_changes_read_back_as_the_mutations_of_the_events(changes):
    events = []
    for number, (kind, first, second) in enumerate(changes):
        old = None if kind == "I" else first
        new = None if kind == "D" else second
        provenance = {"s": "app", "n": "req-1"} if number == 0 else 1
        events.append(_event(kind, old, new, number + 1, provenance))
    decoder, _ = _decoder({TABLE: MIXED})
    expected = [decoder.decode(event) for event in events]
    resolver = ProvenanceResolver()
    assert all(resolver.resolve(mutation) == "" for mutation in expected)
    assert _through_rows(_encoder(), events) == expected


def test_a_row_without_a_column_of_its_shape_is_refused():
    row = {name: "1" for name in MIXED if name != "note"}
    with pytest.raises(SchemaError, match="lacks column 'note'"):
        _encoder().encode(tuple(_event("I", None, row, 1)))


def test_a_key_change_goes_to_the_partitions_of_both_keys():
    encoder = _encoder(8)
    row = dict.fromkeys(MIXED)
    old, new = {**row, "id": "1"}, {**row, "id": "2"}
    change = encoder.encode(tuple(_event("U", old, new, 3)))
    expected = {partition_of(*TABLE, (key,), 8) for key in ("1", "2")}
    assert set(change.partitions) == expected
    truncate = encoder.encode(tuple(_event("T", None, None, 4)))
    assert truncate.partitions == tuple(range(8))


@pytest.mark.parametrize(
    "note", ["plain", "tab\there", "new\nline", "cr\rhere", "back\\slash", "\\N", None, ""]
)
def test_values_copy_escapes_read_back_as_they_were(note):
    row = {name: "1" for name in MIXED} | {"note": note, "tags": None, "doc": '{"a": 1}'}
    change = _encoder().encode(tuple(_event("I", None, row, 1)))
    assert change.new is not None
    values = split_line(change.new)
    assert values[list(MIXED).index("note")] == note
    assert values[list(MIXED).index("tags")] is None


@settings(deadline=None, max_examples=200)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.text(max_size=5)), min_size=3, max_size=3),
        max_size=20,
    ),
    st.sampled_from([(0,), (2,), (1, 0)]),
    st.integers(1, 9),
    st.sampled_from([("public", "t"), ('Odd "s"', "τ\x00")]),
)
def test_line_partitions_are_partition_of_each_lines_key(
    rows: list[list[str | None]],
    positions: tuple[int, ...],
    partitions: int,
    table: tuple[str, str],
) -> None:
    lines = [copy_line(row) for row in rows]
    expected = [
        partition_of(*table, tuple(copy_field(row[p]) for p in positions), partitions)
        for row in rows
    ]
    assert line_partitions(*table, lines, positions, partitions) == expected
