"""The validator reads the ROWS encoding as it reads one message per mutation, and checks counts."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from pgshovel.abc import TickInfo
from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.framing import MutationFramer, RowFramer
from pgshovel.relay.relay import _tick_message
from pgshovel.stream.batches import RowMutations
from pgshovel.stream.validation import StreamValidator
from tests.unit.relay.test_publish import Catalog, _row

NODE = b"\x02" * 16


def _framed(framer: Any, batches: int = 2, rows: int = 30) -> list[stream_pb2.Message]:
    messages: list[stream_pb2.Message] = []
    number = 0
    for batch in range(1, batches + 1):
        framer.begin(
            stream_pb2.BatchIdentifier(id=batch, node=NODE),
            _tick_message(TickInfo(batch, "10:12:11", 5)),
            _tick_message(TickInfo(batch + 1, "12:14:", 6)),
            "v1",
        )
        chunk = []
        for _ in range(rows):
            number += 1
            chunk.append(_row(number))
        framer.add(chunk)
        framer.commit()
        messages += framer.take()[0]
    return [stream_pb2.Message.FromString(m.SerializeToString()) for m in messages]


def _batches(messages: list[Any]) -> list[Any]:
    validator = StreamValidator()
    return list(validator.validate(enumerate(messages)))


def test_rows_validate_into_the_batches_of_one_message_per_mutation() -> None:
    rows = _batches(_framed(RowFramer(Catalog(), 3, 1, 300)))
    mutations = _batches(_framed(MutationFramer(Catalog(), 3)))
    assert [b.batch_id for b in rows] == [b.batch_id for b in mutations] == [1, 2]
    assert [b.mutations for b in rows] == [b.mutations for b in mutations]


def test_a_commit_counting_other_rows_than_the_batch_held_is_a_gap() -> None:
    messages = _framed(RowFramer(Catalog(), 3, 1, 300), batches=1)
    lost = [m for m in messages if m.operation.WhichOneof("operation") == "rows"][1]
    with pytest.raises(StreamError, match="messages of the batch are missing"):
        # The relay's sequence numbers would show the gap first; renumbered, the count does.
        kept = [m for m in messages if m is not lost]
        for sequence, message in enumerate(kept):
            message.header.sequence = sequence
        _batches(kept)


def _reader_without_rows() -> Any:
    """``Message`` as a reader of the per-mutation encoding knows it: no ``rows`` field."""
    file = descriptor_pb2.FileDescriptorProto()
    stream_pb2.DESCRIPTOR.CopyToProto(file)
    for message in file.message_type:
        if message.name == "BatchOperation":
            kept = [field for field in message.field if field.name != "rows"]
            del message.field[:]
            message.field.extend(kept)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("pgshovel.stream.Message"))


def test_a_reader_of_one_message_per_mutation_stops_on_rows_never_misreads_them() -> None:
    old_message = _reader_without_rows()
    messages = [
        old_message.FromString(m.SerializeToString())
        for m in _framed(RowFramer(Catalog(), 3, 1, 300), batches=1)
    ]
    assert messages[1].operation.WhichOneof("operation") is None
    with pytest.raises(StreamError, match="message has no operation"):
        _batches(messages)


def test_rows_are_decoded_only_when_a_reader_asks_for_mutations() -> None:
    (batch,) = _batches(_framed(RowFramer(Catalog(), 3, 1, 300), batches=1))
    mutations = batch.mutations
    assert isinstance(mutations, RowMutations)
    assert len(mutations) == 30 and mutations._decoded is None  # counted, not decoded
    assert sum(message.rows.count for message in mutations.messages) == 30
    assert [mutation.id for mutation in mutations] == list(range(1, 31))
    assert mutations._decoded is not None
