"""Publisher framing: headers, contiguous sequences, batch shape, and the rewind contract."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.protocol import stream_pb2
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.validation import StreamValidator

NODE = uuid.UUID(int=0xA).bytes
PUBLISHER = uuid.UUID(int=0xB).bytes
OTHER_NODE = uuid.UUID(int=0xC).bytes


def batch_id(number: int, node: bytes = NODE) -> stream_pb2.BatchIdentifier:
    return stream_pb2.BatchIdentifier(id=number, node=node)


def tick(number: int) -> stream_pb2.Tick:
    return stream_pb2.Tick(
        id=number,
        snapshot=stream_pb2.Snapshot(xmin=number * 10, xmax=number * 10 + 5, xip=[number * 10 + 1]),
        timestamp=number,
    )


def mutation(number: int) -> stream_pb2.Mutation:
    return stream_pb2.Mutation(
        id=number,
        schema="public",
        table="accounts",
        operation=stream_pb2.Mutation.INSERT,
        key_columns=["id"],
        new=stream_pb2.Row(
            columns=[stream_pb2.Column(name="id", value=stream_pb2.Value(int64=number))]
        ),
        transaction=1000 + number,
        set_version="v1",
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000_000

    def __call__(self) -> int:
        self.now += 7
        return self.now


def test_every_message_is_stamped_with_publisher_epoch_clock_and_next_sequence() -> None:
    clock = Clock()
    publisher = Publisher(epoch=3, publisher=PUBLISHER, clock=clock)
    messages = [
        publisher.begin(batch_id(1), tick(1), tick(2), "v1"),
        publisher.mutation(batch_id(1), mutation(1)),
        publisher.rollback(batch_id(1)),
        publisher.begin(batch_id(1), tick(1), tick(2), "v1"),
        publisher.commit(batch_id(1)),
    ]
    assert [m.header.sequence for m in messages] == [0, 1, 2, 3, 4]
    assert {m.header.publisher for m in messages} == {PUBLISHER}
    assert {m.header.epoch for m in messages} == {3}
    assert [m.header.timestamp for m in messages] == [
        1_700_000_000_000_000 + 7 * n for n in range(1, 6)
    ]
    assert [m.operation.WhichOneof("operation") for m in messages] == [
        "begin",
        "mutation",
        "rollback",
        "begin",
        "commit",
    ]
    assert publisher.next_sequence == 5


def test_frame_batch_is_begin_mutations_in_order_commit_with_one_timestamp() -> None:
    publisher = Publisher(epoch=1, publisher=PUBLISHER, clock=Clock())
    publisher.commit(batch_id(9))  # sequence 0 is taken already
    mutations = [mutation(n) for n in (5, 3, 8)]
    messages = publisher.frame_batch(batch_id(2), tick(1), tick(2), "v7", mutations)

    assert [m.header.sequence for m in messages] == [1, 2, 3, 4, 5]
    assert all(m.operation.batch == batch_id(2) for m in messages)
    assert len({m.header.timestamp for m in messages}) == 1
    begin = messages[0].operation.begin
    assert (begin.start, begin.end, begin.set_version) == (tick(1), tick(2), "v7")
    assert [m.operation.mutation for m in messages[1:-1]] == mutations
    assert messages[-1].operation.HasField("commit")
    assert publisher.next_sequence == 6


def test_framed_mutations_are_copies_of_the_input() -> None:
    publisher = Publisher(epoch=1)
    original = mutation(1)
    [_, framed, _] = publisher.frame_batch(batch_id(1), tick(1), tick(2), "v1", [original])
    original.table = "changed"
    assert framed.operation.mutation.table == "accounts"


def test_an_empty_batch_is_begin_and_commit() -> None:
    messages = Publisher(epoch=1).frame_batch(batch_id(1), tick(1), tick(2), "v1", [])
    assert [m.operation.WhichOneof("operation") for m in messages] == ["begin", "commit"]


def test_default_publisher_is_a_fresh_uuid_and_clock_is_wall_time() -> None:
    first, second = Publisher(epoch=1), Publisher(epoch=1)
    assert len(first.id) == 16
    assert first.id != second.id
    assert uuid.UUID(bytes=first.id).version == 4
    before = time.time_ns() // 1000
    stamp = first.commit(batch_id(1)).header.timestamp
    after = time.time_ns() // 1000
    assert before <= stamp <= after


def test_frame_batch_that_fails_takes_no_sequence_number() -> None:
    publisher = Publisher(epoch=1)

    def failing() -> Iterator[stream_pb2.Mutation]:
        yield mutation(1)
        raise RuntimeError("source connection lost")

    with pytest.raises(RuntimeError, match="source connection lost"):
        publisher.frame_batch(batch_id(1), tick(1), tick(2), "v1", failing())
    assert publisher.next_sequence == 0
    assert publisher.commit(batch_id(1)).header.sequence == 0


def test_rewind_lets_a_rollback_follow_the_last_delivered_message() -> None:
    # The relay built a whole batch; Kafka acknowledged only the first two messages.
    publisher = Publisher(epoch=1, publisher=PUBLISHER)
    built = publisher.frame_batch(batch_id(1), tick(1), tick(2), "v1", [mutation(1), mutation(2)])
    delivered = built[:2]
    publisher.rewind(built[2].header.sequence)
    delivered.append(publisher.rollback(batch_id(1)))
    delivered += publisher.frame_batch(batch_id(1), tick(1), tick(2), "v1", [mutation(1)])

    assert [m.header.sequence for m in delivered] == list(range(6))
    validator = StreamValidator()
    batches = list(validator.validate(enumerate(delivered)))
    assert [(b.batch_id, [m.id for m in b.mutations]) for b in batches] == [(1, [1])]
    assert validator.statistics.batches_rolled_back == 1


@pytest.mark.parametrize("sequence", [-1, 4])
def test_rewind_refuses_sequences_never_built(sequence: int) -> None:
    publisher = Publisher(epoch=1, publisher=PUBLISHER)
    publisher.frame_batch(batch_id(1), tick(1), tick(2), "v1", [mutation(1)])
    with pytest.raises(ValueError, match=f"cannot rewind publisher .* to sequence {sequence}"):
        publisher.rewind(sequence)
    assert publisher.next_sequence == 3


def test_publisher_id_must_be_a_uuid() -> None:
    with pytest.raises(ValueError, match="16-byte uuid, got 3 bytes b'abc'"):
        Publisher(epoch=1, publisher=b"abc")


def test_epoch_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="epoch must not be negative, got -1"):
        Publisher(epoch=-1)


def test_repr_shows_uuid_epoch_and_next_sequence() -> None:
    publisher = Publisher(epoch=2, publisher=PUBLISHER)
    assert repr(publisher) == (
        f"Publisher(id={uuid.UUID(bytes=PUBLISHER)}, epoch=2, next_sequence=0)"
    )


def test_stamping_a_message_built_in_place_equals_framing_a_copy() -> None:
    copying = Publisher(epoch=2, publisher=PUBLISHER, clock=Clock())
    stamping = Publisher(epoch=2, publisher=PUBLISHER, clock=Clock())
    copying.begin(batch_id(1), tick(1), tick(2), "v1")
    stamping.begin(batch_id(1), tick(1), tick(2), "v1")
    built = stream_pb2.Message()
    built.operation.mutation.CopyFrom(mutation(4))
    stamped = stamping.stamp(batch_id(1), built)
    assert stamped is built
    assert (
        stamped.SerializeToString()
        == copying.mutation(batch_id(1), mutation(4)).SerializeToString()
    )
    assert stamping.next_sequence == 2


def test_each_batch_gets_its_own_identifier_in_every_header() -> None:
    publisher = Publisher(epoch=1, publisher=PUBLISHER, clock=Clock())
    framed = [
        *publisher.frame_batch(batch_id(1), tick(1), tick(2), "v1", [mutation(1)]),
        *publisher.frame_batch(batch_id(2), tick(2), tick(3), "v1", [mutation(2)]),
        publisher.stamp(batch_id(3, OTHER_NODE), stream_pb2.Message()),
        publisher.rollback(batch_id(3)),
    ]
    assert [(m.operation.batch.id, m.operation.batch.node) for m in framed] == [
        (1, NODE),
        (1, NODE),
        (1, NODE),
        (2, NODE),
        (2, NODE),
        (2, NODE),
        (3, OTHER_NODE),
        (3, NODE),
    ]
    assert [m.header.sequence for m in framed] == list(range(8))
    assert {(m.header.publisher, m.header.epoch) for m in framed} == {(PUBLISHER, 1)}


class Readings:
    """A clock that returns the given readings in turn."""

    def __init__(self, readings: list[int]) -> None:
        self.readings = iter(readings)

    def __call__(self) -> int:
        return next(self.readings)


@given(
    st.integers(0, 2**63 - 1),
    st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=5),
    st.integers(0, 2**63 - 1),
    st.sampled_from([b"", NODE]),
    st.integers(0, 2**64 - 6),
)
def test_a_framed_serialized_mutation_is_the_stamped_message_serialized(
    epoch: int, readings: list[int], batch: int, node: bytes, start: int
) -> None:
    framing = Publisher(epoch=epoch, publisher=PUBLISHER, clock=Readings(readings))
    stamping = Publisher(epoch=epoch, publisher=PUBLISHER, clock=Readings(readings))
    for publisher in (framing, stamping):
        publisher._next_sequence = start  # no need to build 2**64 messages first
    frame = framing.framer(batch_id(batch, node))
    for number in range(len(readings)):
        built = stream_pb2.Message()
        built.operation.mutation.CopyFrom(mutation(number))
        stamped = stamping.stamp(batch_id(batch, node), built)
        assert frame(mutation(number).SerializeToString()) == stamped.SerializeToString()
    assert framing.next_sequence == stamping.next_sequence == start + len(readings)


def test_framing_takes_the_next_sequence_and_reads_the_clock_for_every_message() -> None:
    publisher = Publisher(epoch=3, publisher=PUBLISHER, clock=Clock())
    publisher.begin(batch_id(1), tick(1), tick(2), "v1")
    frame = publisher.framer(batch_id(1))
    framed = [stream_pb2.Message.FromString(frame(mutation(n).SerializeToString())) for n in (5, 6)]
    assert [m.header.sequence for m in framed] == [1, 2]
    assert framed[1].header.timestamp - framed[0].header.timestamp == 7
    assert [m.operation.mutation for m in framed] == [mutation(5), mutation(6)]
    assert publisher.commit(batch_id(1)).header.sequence == 3
