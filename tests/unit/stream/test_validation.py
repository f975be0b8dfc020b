"""The validating state machine, scenario by scenario: what it emits, skips and rejects."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.validation import State, StreamValidator
from tests._positions import after, last_offset

NODE = uuid.UUID(int=0xA).bytes
OTHER_NODE = uuid.UUID(int=0xC).bytes


def batch_id(number: int, node: bytes = NODE) -> stream_pb2.BatchIdentifier:
    return stream_pb2.BatchIdentifier(id=number, node=node)


def tick(number: int) -> stream_pb2.Tick:
    return stream_pb2.Tick(id=number, snapshot=stream_pb2.Snapshot(xmin=number, xmax=number + 1))


def mutation(number: int) -> stream_pb2.Mutation:
    return stream_pb2.Mutation(
        id=number, schema="public", table="t", operation=stream_pb2.Mutation.INSERT
    )


def publisher(epoch: int, number: int) -> Publisher:
    return Publisher(epoch=epoch, publisher=uuid.UUID(int=number).bytes, clock=lambda: 0)


def frame(
    source: Publisher, number: int, mutation_ids: Sequence[int], node: bytes = NODE
) -> list[stream_pb2.Message]:
    return source.frame_batch(
        batch_id(number, node), tick(number), tick(number + 1), "v1", map(mutation, mutation_ids)
    )


def begin(source: Publisher, number: int) -> stream_pb2.Message:
    return source.begin(batch_id(number), tick(number), tick(number + 1), "v1")


def summary(batches: Sequence[CommittedBatch]) -> list[tuple[int, list[int]]]:
    return [(batch.batch_id, [m.id for m in batch.mutations]) for batch in batches]


def run(
    messages: Sequence[stream_pb2.Message],
    position: StreamPosition | None = None,
    first_offset: int = 0,
) -> tuple[StreamValidator, list[CommittedBatch]]:
    validator = StreamValidator(position)
    batches = list(validator.validate(enumerate(messages, start=first_offset)))
    return validator, batches


@dataclass
class Scenario:
    messages: list[stream_pb2.Message]
    emitted: list[tuple[int, list[int]]]
    statistics: dict[str, int] = field(default_factory=dict)


def normal_flow() -> Scenario:
    a = publisher(1, 1)
    return Scenario(
        frame(a, 1, [1, 2]) + frame(a, 2, []) + frame(a, 3, [3]),
        [(1, [1, 2]), (2, []), (3, [3])],
        {"messages": 9, "batches_committed": 3},
    )


def duplicated_messages() -> Scenario:
    a = publisher(1, 1)
    first = frame(a, 1, [1, 2])
    doubled = [m for message in first for m in (message, message)]
    # A late re-read of an old message of the same publisher is a duplicate too.
    return Scenario(
        [*doubled, first[1], *frame(a, 2, [3])],
        [(1, [1, 2]), (2, [3])],
        {"duplicates_skipped": 5, "batches_committed": 2},
    )


def zombie_interleaved_after_failover() -> Scenario:
    a, b = publisher(1, 1), publisher(2, 2)
    first = frame(a, 1, [10])
    late = frame(a, 2, [20, 21])  # a lost its leadership during batch 2
    resent = frame(b, 2, [20, 21])
    return Scenario(
        [*first, *late[:2], resent[0], late[2], resent[1], late[3], *resent[2:]],
        [(1, [10]), (2, [20, 21])],
        {"fenced_skipped": 2, "batches_abandoned": 1, "batches_committed": 2},
    )


def zombie_with_same_epoch_after_restart() -> Scenario:
    # The relay replaced its publisher without a new election: same epoch, new uuid.
    a, b = publisher(1, 1), publisher(1, 2)
    late = frame(a, 1, [10])
    return Scenario(
        [late[0], *frame(b, 1, [10]), *late[1:]],
        [(1, [10])],
        {"fenced_skipped": 2, "batches_abandoned": 1},
    )


def new_publisher_mid_batch() -> Scenario:
    a, b = publisher(1, 1), publisher(2, 2)
    return Scenario(
        [*frame(a, 1, [10]), *frame(a, 2, [20, 21])[:2], *frame(b, 2, [20, 21])],
        [(1, [10]), (2, [20, 21])],
        {"batches_abandoned": 1, "batches_committed": 2},
    )


def rollback_then_resend() -> Scenario:
    a = publisher(1, 1)
    return Scenario(
        [
            begin(a, 1),
            a.mutation(batch_id(1), mutation(10)),
            a.rollback(batch_id(1)),
            *frame(a, 1, [10, 11]),
        ],
        [(1, [10, 11])],
        {"batches_rolled_back": 1, "batches_committed": 1},
    )


def resent_committed_batch_after_crash() -> Scenario:
    a, b = publisher(1, 1), publisher(2, 2)
    return Scenario(
        frame(a, 1, [10]) + frame(a, 2, [20]) + frame(b, 2, [20]) + frame(b, 3, [30]),
        [(1, [10]), (2, [20]), (3, [30])],
        {"resent_batches_skipped": 1, "batches_committed": 3},
    )


def batches_of_two_nodes() -> Scenario:
    a = publisher(1, 1)
    return Scenario(
        frame(a, 5, [1]) + frame(a, 2, [2], OTHER_NODE) + frame(a, 6, [3]),
        [(5, [1]), (2, [2]), (6, [3])],
        {"batches_committed": 3},
    )


def reader_joining_mid_batch() -> Scenario:
    a = publisher(1, 1)
    messages = frame(a, 1, [10, 11]) + frame(a, 2, [20])
    return Scenario(messages[2:], [(2, [20])], {"partial_skipped": 2})


def reader_joining_during_failover() -> Scenario:
    # The reader starts where a zombie still writes and the new publisher is mid-batch.
    a, b = publisher(1, 1), publisher(2, 2)
    old = frame(a, 1, [10]) + frame(a, 2, [20])
    new = frame(b, 1, [10]) + frame(b, 2, [20]) + frame(b, 3, [30])
    return Scenario(
        [old[4], new[4], old[5], *new[5:]],
        [(3, [30])],
        {"partial_skipped": 3, "fenced_skipped": 1, "batches_committed": 1},
    )


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    function.__name__: function
    for function in (
        normal_flow,
        duplicated_messages,
        zombie_interleaved_after_failover,
        zombie_with_same_epoch_after_restart,
        new_publisher_mid_batch,
        rollback_then_resend,
        resent_committed_batch_after_crash,
        batches_of_two_nodes,
        reader_joining_mid_batch,
        reader_joining_during_failover,
    )
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_valid_stream(name: str) -> None:
    scenario = SCENARIOS[name]()
    validator, batches = run(scenario.messages)
    assert summary(batches) == scenario.emitted
    for counter, expected in scenario.statistics.items():
        assert getattr(validator.statistics, counter) == expected, counter
    assert validator.statistics.messages == len(scenario.messages)


def test_committed_batch_carries_begin_and_commit_position() -> None:
    a = publisher(4, 1)
    messages = frame(a, 1, [10]) + frame(a, 7, [70, 71], OTHER_NODE)
    _, batches = run(messages, first_offset=100)
    last = batches[-1]
    assert last.node == OTHER_NODE
    assert last.begin.start == tick(7)
    assert last.position == after(
        106,
        publisher=a.id,
        sequence=6,
        epoch=4,
        committed=((NODE, 1), (OTHER_NODE, 7)),
    )
    assert last.position.last_batch(OTHER_NODE) == 7


def first_batch(source: Publisher) -> list[stream_pb2.Message]:
    return frame(source, 1, [10, 11])


def with_epoch(message: stream_pb2.Message, epoch: int) -> stream_pb2.Message:
    message.header.epoch = epoch
    return message


def with_publisher(message: stream_pb2.Message, publisher_id: bytes) -> stream_pb2.Message:
    message.header.publisher = publisher_id
    return message


def other(epoch: int = 2) -> Publisher:
    return publisher(epoch, 2)


# Each case builds its stream from fresh publishers: (messages, expected problem).
ERRORS: dict[str, Callable[[Publisher], tuple[list[stream_pb2.Message], str]]] = {
    "gap": lambda a: (
        (lambda first: first[:1] + first[2:])(first_batch(a)),
        "sequence gap: expected sequence 1 next, 1 message",
    ),
    "mutation without begin": lambda a: (
        [*first_batch(a), a.mutation(batch_id(2), mutation(20))],
        "mutation without an open batch",
    ),
    "commit without begin": lambda a: (
        [*first_batch(a), a.commit(batch_id(2))],
        "commit without an open batch",
    ),
    "rollback without begin": lambda a: (
        [*first_batch(a), a.rollback(batch_id(2))],
        "rollback without an open batch",
    ),
    "commit of another batch": lambda a: (
        [begin(a, 1), a.commit(batch_id(2))],
        "commit for another batch than the open one",
    ),
    "mutation of another node": lambda a: (
        [begin(a, 1), a.mutation(batch_id(1, OTHER_NODE), mutation(1))],
        "mutation for another batch than the open one",
    ),
    "begin while open": lambda a: (
        [begin(a, 1), begin(a, 2)],
        "begin while a batch is still open",
    ),
    "new publisher not at sequence 0": lambda a: (
        first_batch(a) + frame(other(), 2, [20])[1:],
        "new publisher starts at sequence 1 instead of 0",
    ),
    "epoch changed": lambda a: (
        [*first_batch(a), with_epoch(a.rollback(batch_id(2)), 2)],
        "publisher changed its epoch from 1 to 2",
    ),
    "no operation": lambda a: (
        [
            *first_batch(a),
            stream_pb2.Message(header=stream_pb2.Header(publisher=a.id, sequence=4, epoch=1)),
        ],
        "message has no operation",
    ),
    "publisher id not a uuid": lambda a: (
        [*first_batch(a), with_publisher(a.commit(batch_id(1)), b"short")],
        "publisher id must be a 16-byte uuid, got 5 bytes",
    ),
    "no header": lambda a: ([*first_batch(a), stream_pb2.Message()], "message has no header"),
    "begin without node": lambda a: (
        [*first_batch(a), a.begin(stream_pb2.BatchIdentifier(id=2), tick(2), tick(3), "v1")],
        "begin needs a batch identifier with a 16-byte node uuid",
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_invalid_stream(name: str) -> None:
    messages, problem = ERRORS[name](publisher(1, 1))
    with pytest.raises(StreamError) as raised:
        run(messages)
    assert problem in str(raised.value)


def test_error_names_offset_publisher_sequence_batch_and_state() -> None:
    a = publisher(3, 1)
    messages = [*frame(a, 41, []), begin(a, 42), a.commit(batch_id(43))]
    with pytest.raises(StreamError) as raised:
        run(messages, first_offset=1000)
    text = str(raised.value)
    assert "at offset 1003" in text
    assert f"publisher {uuid.UUID(int=1)}" in text
    assert "sequence 3" in text
    assert "epoch 3" in text
    assert f"batch 43 of node {uuid.UUID(bytes=NODE)}" in text
    assert "in state 'open' with batch 42" in text
    assert text == text.lower()


def test_error_after_takeover_names_both_publishers() -> None:
    a, b = publisher(1, 1), publisher(2, 2)
    messages = frame(a, 1, []) + frame(b, 2, [20])[2:]
    with pytest.raises(StreamError) as raised:
        run(messages)
    text = str(raised.value)
    assert f"publisher {uuid.UUID(int=2)}, sequence 2" in text
    assert f"taking over from publisher {uuid.UUID(int=1)}" in text
    assert "at offset 2" in text


class TestResume:
    def stream(self) -> tuple[Publisher, list[stream_pb2.Message], StreamPosition]:
        a = publisher(2, 1)
        messages = frame(a, 1, [10]) + frame(a, 2, [20]) + frame(a, 3, [30])
        _, batches = run(messages)
        return a, messages, batches[0].position

    def test_continuation_emits_only_what_follows(self) -> None:
        _, messages, position = self.stream()
        assert last_offset(position) == 2
        validator, batches = run(messages[3:], position, first_offset=3)
        assert summary(batches) == [(2, [20]), (3, [30])]
        assert validator.state is State.IDLE

    def test_messages_at_or_before_the_position_are_skipped(self) -> None:
        _, messages, position = self.stream()
        validator, batches = run(messages, position)
        assert summary(batches) == [(2, [20]), (3, [30])]
        assert validator.statistics.duplicates_skipped == 3

    def test_gap_after_the_position_is_an_error(self) -> None:
        _, messages, position = self.stream()
        with pytest.raises(StreamError, match=r"at offset 4 .*sequence 4.*expected sequence 3"):
            run(messages[4:], position, first_offset=4)

    def test_new_publisher_with_same_or_newer_epoch_takes_over(self) -> None:
        _, _, position = self.stream()
        for epoch in (2, 3):
            b = publisher(epoch, 2)
            validator, batches = run(frame(b, 2, [20]), position, first_offset=50)
            assert summary(batches) == [(2, [20])]
            assert validator.publisher == b.id

    def test_publisher_with_older_epoch_is_fenced(self) -> None:
        _, _, position = self.stream()
        zombie = publisher(1, 3)
        validator, batches = run(frame(zombie, 2, [20]), position, first_offset=50)
        assert batches == []
        assert validator.statistics.fenced_skipped == 3

    def test_new_publisher_must_start_at_zero(self) -> None:
        _, _, position = self.stream()
        b = publisher(2, 2)
        with pytest.raises(StreamError, match="new publisher starts at sequence 1"):
            run(frame(b, 2, [20])[1:], position, first_offset=50)

    def test_resent_batch_is_recognised_from_the_position(self) -> None:
        _, _, position = self.stream()
        b = publisher(3, 2)
        validator, batches = run(frame(b, 1, [10]) + frame(b, 2, [20]), position, 50)
        assert summary(batches) == [(2, [20])]
        assert validator.statistics.resent_batches_skipped == 1


def test_fenced_publisher_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    a, b = publisher(2, 1), publisher(1, 2)
    caplog.set_level("WARNING", logger="pgshovel.stream.validation")
    run(frame(a, 1, []) + frame(b, 2, [1, 2]))
    warnings = [r for r in caplog.records if "fenced publisher" in r.getMessage()]
    assert len(warnings) == 1
    assert str(uuid.UUID(int=2)) in warnings[0].getMessage()


def test_schema_changes_and_watermarks_are_emitted_at_their_place_among_the_mutations() -> None:
    source = publisher(1, 1)
    identifier = batch_id(3)
    messages = [begin(source, 3)]
    change = stream_pb2.SchemaChange(id=11, table="t", kind=stream_pb2.SchemaChange.ALTER)
    mark = stream_pb2.Watermark(id=13, request="r:0:low")
    items: list[tuple[str, Any]] = [
        ("mutation", mutation(10)),
        ("schema_change", change),
        ("mutation", mutation(12)),
        ("watermark", mark),
        ("mutation", mutation(14)),
    ]
    for kind, item in items:
        message = stream_pb2.Message()
        getattr(message.operation, kind).CopyFrom(item)
        messages.append(source.stamp(identifier, message))
    messages.append(source.commit(identifier))
    _, batches = run(messages)
    assert summary(batches) == [(3, [10, 12, 14])]
    assert [(position, marker.id) for position, marker in batches[0].markers] == [(1, 11), (2, 13)]


def test_a_schema_change_outside_a_batch_is_refused() -> None:
    source = publisher(1, 1)
    stray = stream_pb2.Message()
    stray.operation.schema_change.id = 1
    messages = [*frame(source, 1, [1]), source.stamp(batch_id(2), stray)]
    with pytest.raises(StreamError, match="schema_change without an open batch"):
        run(messages)
