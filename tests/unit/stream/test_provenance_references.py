"""A transaction's provenance travels once per batch: the validator resolves the references."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.validation import StreamValidator
from tests.unit.stream.test_validation import batch_id, publisher, tick

ANNOTATION = "x" * 200_000


def stamped(number: int, transaction: int, reference: int = 0) -> stream_pb2.Mutation:
    """A mutation carrying its provenance in full, or (``reference``) only a reference."""
    found = stream_pb2.Mutation(
        id=number,
        schema="public",
        table="t",
        operation=stream_pb2.Mutation.INSERT,
        transaction=transaction,
    )
    if reference:
        found.provenance_of = reference
    else:
        found.provenance.session_user = f"user{transaction}"
        found.provenance.annotation = ANNOTATION
    return found


SOURCE = publisher(1, 1)


def framed(
    number: int, mutations: Sequence[stream_pb2.Mutation], source: Publisher | None = None
) -> list[stream_pb2.Message]:
    """The batch framed by ``source`` (default: a fresh publisher)."""
    source = source or publisher(1, 1)
    return source.frame_batch(batch_id(number), tick(number), tick(number + 1), "v1", mutations)


def test_references_become_the_carriers_provenance() -> None:
    mutations = [
        stamped(1, 900),
        stamped(2, 901),
        stamped(3, 900, reference=1),
        stamped(4, 901, reference=2),
        stamped(5, 900, reference=1),
    ]
    messages = framed(7, mutations)
    assert sum(len(m.SerializeToString()) for m in messages) < 3 * len(ANNOTATION)
    (batch,) = StreamValidator().validate(enumerate(messages))
    assert [(m.id, m.provenance.session_user) for m in batch.mutations] == [
        (1, "user900"),
        (2, "user901"),
        (3, "user900"),
        (4, "user901"),
        (5, "user900"),
    ]
    assert all(m.provenance.annotation == ANNOTATION for m in batch.mutations)
    assert not any(m.provenance_of for m in batch.mutations)


def test_references_resolve_across_the_parts_of_a_batch() -> None:
    messages = framed(7, [stamped(1, 900), stamped(2, 900, 1), stamped(3, 900, 1)])
    validator = StreamValidator()
    assert list(validator.validate(enumerate(messages[:3]))) == []
    part = validator.take_part(1)
    assert part is not None and [m.id for m in part.mutations] == [1, 2]
    (rest,) = validator.validate(enumerate(messages[3:], start=3))
    assert rest.mutations[0].provenance.session_user == "user900"


@pytest.mark.parametrize(
    "messages",
    [
        # a reference to a mutation the batch does not hold
        framed(7, [stamped(1, 900), stamped(2, 900, reference=9)]),
        # references never reach back into an earlier batch
        framed(7, [stamped(1, 900)], SOURCE) + framed(8, [stamped(2, 900, reference=1)], SOURCE),
    ],
    ids=["unknown", "earlier-batch"],
)
def test_a_reference_the_batch_cannot_resolve_is_a_stream_error(
    messages: list[stream_pb2.Message],
) -> None:
    with pytest.raises(StreamError, match=r"takes the provenance of mutation \d+, which its batch"):
        list(StreamValidator().validate(enumerate(messages)))


def test_a_rolled_back_batch_forgets_its_carriers() -> None:
    source = publisher(1, 1)
    identifier = batch_id(7)
    first = source.begin(identifier, tick(7), tick(8), "v1")
    carrier = source.mutation(identifier, stamped(1, 900))
    rollback = source.rollback(identifier)
    again = source.begin(identifier, tick(7), tick(8), "v1")
    dangling = source.mutation(identifier, stamped(2, 900, reference=1))
    with pytest.raises(StreamError, match="takes the provenance of mutation 1"):
        list(StreamValidator().validate(enumerate([first, carrier, rollback, again, dangling])))
