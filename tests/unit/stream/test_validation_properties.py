"""Property tests: whatever a crashing, retrying relay writes, readers apply each batch once.

A simulated relay frames batches with ``Publisher``s and publishes them through
a producer that sometimes writes a message twice (a retry after a lost ack). It
fails in the ways the publisher contract allows: a delivered prefix followed by
rewind and Rollback, or a crash anywhere (even after the Commit was acked but
before ``finish_batch``) after which a new publisher, sometimes of a newer epoch,
re-sends the batch while the old one may still leak its remaining messages.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.protocol import stream_pb2
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.validation import StreamValidator
from tests._positions import last_offset
from tests.unit.stream.test_validation import batch_id, mutation, summary, tick

Expected = list[tuple[int, list[int]]]


@dataclass
class SimulatedRelay:
    draw: st.DrawFn
    log: list[stream_pb2.Message] = field(default_factory=list)
    zombie: list[stream_pb2.Message] = field(default_factory=list)
    epoch: int = 1
    publishers: int = 0
    publisher: Publisher = field(init=False)

    def __post_init__(self) -> None:
        self.publisher = self.new_publisher()

    def new_publisher(self) -> Publisher:
        self.publishers += 1
        return Publisher(epoch=self.epoch, publisher=uuid.UUID(int=self.publishers).bytes)

    def deliver(self, messages: list[stream_pb2.Message]) -> None:
        for message in messages:
            self.log.append(message)
            if self.draw(st.integers(0, 9)) == 0:
                self.log.append(message)  # producer retry after a lost ack
            leaking: bool = bool(self.zombie) and self.draw(st.booleans())
            while leaking:
                self.log.append(self.zombie.pop(0))
                leaking = bool(self.zombie) and self.draw(st.booleans())

    def publish(self, number: int, mutation_ids: list[int]) -> None:
        for attempt in range(4):
            messages = self.publisher.frame_batch(
                batch_id(number), tick(number), tick(number + 1), "v1", map(mutation, mutation_ids)
            )
            outcome = "ok" if attempt == 3 else self.draw(st.sampled_from(["ok", "fail", "crash"]))
            if outcome == "ok":
                self.deliver(messages)
                return
            if outcome == "fail":
                # Kafka acked a prefix (at least the Begin, never the Commit).
                cut = self.draw(st.integers(1, len(messages) - 1))
                self.deliver(messages[:cut])
                self.publisher.rewind(messages[cut].header.sequence)
                self.deliver([self.publisher.rollback(batch_id(number))])
            else:
                cut = self.draw(st.integers(0, len(messages)))
                self.deliver(messages[:cut])
                if self.draw(st.booleans()):
                    # Lost the leadership: a newer epoch takes over, the old relay may leak.
                    self.epoch += 1
                    self.zombie.extend(messages[cut:])
                self.publisher = self.new_publisher()


@st.composite
def relay_runs(draw: st.DrawFn) -> tuple[list[stream_pb2.Message], Expected]:
    relay = SimulatedRelay(draw)
    expected: Expected = []
    for number in range(1, draw(st.integers(1, 8)) + 1):
        mutation_ids = [number * 100 + n for n in range(draw(st.integers(0, 4)))]
        relay.publish(number, mutation_ids)
        expected.append((number, mutation_ids))
    relay.deliver([])
    relay.log.extend(relay.zombie)
    return relay.log, expected


@settings(max_examples=300, deadline=None)
@given(relay_runs())
def test_every_committed_batch_is_emitted_once_in_order(
    run: tuple[list[stream_pb2.Message], Expected],
) -> None:
    log, expected = run
    validator = StreamValidator()
    batches = list(validator.validate(enumerate(log)))
    assert summary(batches) == expected
    offsets = [last_offset(batch.position) for batch in batches]
    assert offsets == sorted(offsets)
    assert all(log[last_offset(batch.position)].operation.HasField("commit") for batch in batches)
    assert validator.statistics.messages == len(log)


@settings(max_examples=100, deadline=None)
@given(relay_runs(), st.data())
def test_resuming_from_any_committed_position_emits_exactly_the_rest(
    run: tuple[list[stream_pb2.Message], Expected], data: st.DataObject
) -> None:
    log, expected = run
    batches = list(StreamValidator().validate(enumerate(log)))
    resume_after = data.draw(st.integers(0, len(batches) - 1))
    position = batches[resume_after].position
    rest = list(enumerate(log))[last_offset(position) + 1 :]
    resumed = list(StreamValidator(position).validate(rest))
    assert summary(resumed) == expected[resume_after + 1 :]
