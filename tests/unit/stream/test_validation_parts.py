"""Batches too large to hold whole: the validator hands them over in parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.validation import StreamValidator
from tests._positions import last_offset
from tests.unit.stream.test_validation import batch_id, begin, frame, mutation, publisher


def feed(
    validator: StreamValidator, messages: Sequence[stream_pb2.Message], first: int
) -> list[CommittedBatch]:
    return list(validator.validate(enumerate(messages, start=first)))


def ids(batch: CommittedBatch) -> list[int]:
    return [m.id for m in batch.mutations]


def test_an_open_batch_is_taken_in_parts_and_commits_with_the_rest() -> None:
    a = publisher(1, 1)
    messages = frame(a, 1, [1, 2, 3, 4, 5])  # begin, 5 mutations, commit
    validator = StreamValidator()
    assert feed(validator, messages[:3], 0) == []
    assert validator.take_part(3) is None  # only 2 mutations held
    first = validator.take_part(2)
    assert first is not None and not first.complete
    assert ids(first) == [1, 2]
    assert last_offset(first.position) == 2  # its last message, never a position to store
    assert feed(validator, messages[3:5], 3) == []
    second = validator.take_part(1)
    assert second is not None and ids(second) == [3, 4] and last_offset(second.position) == 4
    assert second.begin == first.begin and second.batch_id == 1
    (rest,) = feed(validator, messages[5:], 5)
    assert rest.complete and ids(rest) == [5] and last_offset(rest.position) == 6
    assert validator.take_abandoned() is False
    assert validator.statistics.parts_taken == 2
    assert validator.statistics.batches_committed == 1


def test_no_part_outside_an_open_batch_or_of_nothing() -> None:
    a = publisher(1, 1)
    validator = StreamValidator()
    feed(validator, frame(a, 1, [1, 2]), 0)
    assert validator.take_part(1) is None  # committed: nothing open
    feed(validator, [begin(a, 2)], 4)
    assert validator.take_part(0) is None  # open, but no mutation yet


def test_markers_of_a_part_count_from_its_first_mutation() -> None:
    a = publisher(1, 1)
    identifier = batch_id(3)
    items: list[tuple[str, Any]] = [
        ("mutation", mutation(10)),
        ("mutation", mutation(11)),
        ("watermark", stream_pb2.Watermark(id=12, request="r:low")),
        ("mutation", mutation(13)),
        ("schema_change", stream_pb2.SchemaChange(id=14, table="t")),
        ("mutation", mutation(15)),
    ]
    messages = [begin(a, 3)]
    for kind, item in items:
        message = stream_pb2.Message()
        getattr(message.operation, kind).CopyFrom(item)
        messages.append(a.stamp(identifier, message))
    validator = StreamValidator()
    feed(validator, messages[:4], 0)  # begin, 10, 11, watermark
    part = validator.take_part(2)
    assert part is not None
    assert ids(part) == [10, 11]
    assert [(n, marker.id) for n, marker in part.markers] == [(2, 12)]
    feed(validator, messages[4:], 4)
    (rest,) = feed(validator, [a.commit(identifier)], len(messages))
    assert ids(rest) == [13, 15]
    assert [(n, marker.id) for n, marker in rest.markers] == [(1, 14)]


def test_a_rollback_after_parts_is_reported_once_and_the_resent_batch_comes_whole() -> None:
    a = publisher(1, 1)
    validator = StreamValidator()
    opening = [begin(a, 1), a.mutation(batch_id(1), mutation(1))]
    feed(validator, opening, 0)
    assert validator.take_part(1) is not None
    (resent,) = feed(validator, [a.rollback(batch_id(1)), *frame(a, 1, [1, 2])], 2)
    assert ids(resent) == [1, 2] and resent.complete
    assert validator.take_abandoned() is True
    assert validator.take_abandoned() is False
    assert validator.statistics.parts_abandoned == 1


def test_a_rollback_without_parts_out_is_not_reported() -> None:
    a = publisher(1, 1)
    validator = StreamValidator()
    feed(validator, [begin(a, 1), a.mutation(batch_id(1), mutation(1)), a.rollback(batch_id(1))], 0)
    assert validator.take_abandoned() is False


def test_a_new_publisher_abandoning_a_batch_with_parts_out_is_reported() -> None:
    a, b = publisher(1, 1), publisher(2, 2)
    validator = StreamValidator()
    feed(validator, frame(a, 2, [20, 21, 22])[:3], 0)  # begin, 20, 21
    part = validator.take_part(2)
    assert part is not None and ids(part) == [20, 21]
    (resent,) = feed(validator, frame(b, 2, [20, 21, 22]), 3)
    assert ids(resent) == [20, 21, 22]
    assert validator.take_abandoned() is True
    assert validator.statistics.batches_abandoned == 1


def test_a_resent_batch_already_committed_gives_no_parts() -> None:
    a = publisher(1, 1)
    validator = StreamValidator()
    feed(validator, frame(a, 1, [1]), 0)
    feed(validator, frame(a, 1, [1, 2, 3])[:3], 3)  # the same batch again, skipped
    assert validator.take_part(1) is None
