"""Finding the last batch a stream holds whole, from the messages read back."""

from __future__ import annotations

import uuid

from pgshovel.protocol import stream_pb2
from pgshovel.stream.last_batch import begin_of, last_commit
from pgshovel.stream.publisher import Publisher

NODE = uuid.UUID(int=7).bytes


def batch(number: int) -> stream_pb2.BatchIdentifier:
    return stream_pb2.BatchIdentifier(id=number, node=NODE)


def tick(number: int) -> stream_pb2.Tick:
    return stream_pb2.Tick(id=number)


def test_the_last_commit_and_its_latest_begin_before_it() -> None:
    first, again = Publisher(epoch=1), Publisher(epoch=2)
    messages = [
        *first.frame_batch(batch(1), tick(1), tick(2), "v", []),
        *first.frame_batch(batch(2), tick(2), tick(3), "v", [])[:1],  # begin, then a crash
        *again.frame_batch(batch(2), tick(2), tick(3), "v", []),  # the batch re-sent whole
        again.begin(batch(3), tick(3), tick(4), "v"),  # a batch still open at the end
    ]
    numbered = list(enumerate(messages, start=100))
    commit = last_commit(numbered)
    assert commit is not None and commit[0] == 104
    found = begin_of(numbered, (NODE, 2), commit[0])
    assert found is not None and found[0] == 103
    assert found[1].operation.begin.end.id == 3
    assert begin_of(numbered, (NODE, 3), commit[0]) is None  # after the commit: not it
    assert last_commit(numbered[:1]) is None
