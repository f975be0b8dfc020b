"""The stream position: one opaque value, its document (and the forms older releases stored)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import StateError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.validation import State, StreamValidator
from tests.unit.stream.test_validation import frame, publisher, summary

NODE = bytes(range(16))

cursors = st.builds(
    PartitionCursor,
    next_offset=st.integers(0, 2**62),
    publisher=st.one_of(st.just(b""), st.binary(min_size=16, max_size=16)),
    sequence=st.integers(-1, 2**62),
    epoch=st.integers(0, 2**31),
)
positions = st.builds(
    StreamPosition,
    partitions=st.lists(cursors, min_size=1, max_size=4).map(tuple),
    committed=st.lists(
        st.tuples(st.binary(min_size=16, max_size=16), st.integers(0, 2**62)), max_size=3
    ).map(tuple),
)


@settings(deadline=None)
@given(positions)
def test_the_document_round_trips(position: StreamPosition) -> None:
    document = position.to_document()
    assert document["version"] == 1
    assert StreamPosition.from_document(document) == position


def test_start_is_before_the_next_message_of_every_partition() -> None:
    position = StreamPosition.start((1234, 99))
    assert position.partitions == (PartitionCursor(1234), PartitionCursor(99))
    assert not position.consumed
    assert position.committed == ()
    assert position.describe() == "0:1234,1:99"
    assert position.messages == 1333
    assert StreamPosition.start((7,)).describe() == "0:7"


def test_last_batch_per_node() -> None:
    position = StreamPosition((PartitionCursor(5, b"p" * 16, 4, 1),), ((NODE, 12),))
    assert position.last_batch(NODE) == 12
    assert position.last_batch(b"x" * 16) is None
    assert position.consumed


def test_reads_the_position_of_the_previous_release() -> None:
    """0.2 stored the offset of the last message consumed, and null before the first batch
    with the start offset beside it."""
    legacy = {
        "offset": 41,
        "publisher": "ab" * 16,
        "sequence": 7,
        "epoch": 3,
        "committed": [[NODE.hex(), 12]],
    }
    position = StreamPosition.from_document(legacy)
    assert position == StreamPosition(
        (PartitionCursor(42, bytes.fromhex("ab" * 16), 7, 3),), ((NODE, 12),)
    )
    assert StreamPosition.from_document(None, start_offset=17) == StreamPosition.start((17,))


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([1, 2], "position"),
        ({"version": 1, "committed": []}, "position.partitions"),
        ({"version": 1, "partitions": {}, "committed": []}, "position.partitions"),
        ({"version": 1, "partitions": [], "committed": []}, "position.partitions"),
        (
            {"version": 1, "partitions": [{"next_offset": 1}], "committed": []},
            "position.partitions[0].publisher",
        ),
        (
            {
                "version": 1,
                "partitions": [{"next_offset": -1, "publisher": "", "sequence": 0, "epoch": 0}],
            },
            "position.partitions[0].next_offset",
        ),
        (
            {
                "version": 1,
                "partitions": [{"next_offset": 1, "publisher": "zz", "sequence": 0, "epoch": 0}],
            },
            "position.partitions[0].publisher",
        ),
        (
            {
                "version": 1,
                "partitions": [{"next_offset": "1", "publisher": "", "sequence": 0, "epoch": 0}],
            },
            "position.partitions[0].next_offset",
        ),
        (
            {
                "version": 1,
                "partitions": [{"next_offset": 1, "publisher": "", "sequence": 0, "epoch": 0}],
                "committed": [["00", 1, 2]],
            },
            "position.committed[0]",
        ),
        (
            {
                "version": 1,
                "partitions": [{"next_offset": 1, "publisher": "", "sequence": 0, "epoch": 0}],
                "committed": {"00": 1},
            },
            "position.committed",
        ),
        ({"version": 9, "partitions": []}, "position.version"),
        ({"offset": 3, "publisher": "", "sequence": 0, "epoch": 0}, "position.publisher"),
        ({"offset": True, "publisher": "aa", "sequence": 0, "epoch": 0}, "position.offset"),
        (None, "position"),
    ],
)
def test_a_document_that_does_not_read_names_the_field(document: Any, field: str) -> None:
    with pytest.raises(StateError, match=re.escape(f"field '{field}'")):
        StreamPosition.from_document(document)


def test_the_validator_synchronizes_on_a_start_position() -> None:
    """A position that consumed nothing (the loader's start) skips the tail of a batch in
    progress, exactly as a validator started without a position did."""
    a = publisher(1, 1)
    messages = frame(a, 1, [10, 11]) + frame(a, 2, [20])
    validator = StreamValidator(StreamPosition.start((102,)))
    assert validator.state is State.SYNCHRONIZING
    batches = list(validator.validate(enumerate(messages[2:], start=102)))
    assert summary(batches) == [(2, [20])]
    assert validator.statistics.partial_skipped == 2
    assert batches[0].position.cursor(0) == PartitionCursor(107, a.id, 6, 1)


def test_the_validator_resumes_from_a_position_and_starts_the_next_from_its_batches() -> None:
    a = publisher(2, 1)
    messages = frame(a, 1, [10]) + frame(a, 2, [20]) + frame(a, 3, [30])
    first = next(StreamValidator().validate(enumerate(messages)))
    assert first.position.cursor(0).next_offset == 3
    assert first.position.last_batch(first.node) == 1
    document = first.position.to_document()
    resumed = StreamValidator(StreamPosition.from_document(document))
    assert resumed.state is State.IDLE
    batches = list(resumed.validate(enumerate(messages)))
    assert summary(batches) == [(2, [20]), (3, [30])]
    assert resumed.statistics.duplicates_skipped == 3


def test_every_partition_of_the_position_is_kept_in_the_positions_it_gives() -> None:
    """Partition 1 is held (not fed yet): the positions of batches keep its cursor."""
    a = publisher(1, 1)
    other = PartitionCursor(55, b"q" * 16, 9, 1)
    validator = StreamValidator(StreamPosition((PartitionCursor(0), other)))
    (batch,) = validator.validate(enumerate(frame(a, 1, [10])))
    assert batch.position.partitions == (PartitionCursor(3, a.id, 2, 1), other)
    assert batch.position.describe() == "0:3,1:55"


def test_the_batch_offset_is_its_commit_offset() -> None:
    a = publisher(1, 1)
    messages: list[stream_pb2.Message] = frame(a, 1, [10, 11])
    (batch,) = StreamValidator().validate(enumerate(messages, start=40))
    assert batch.offset == 43
