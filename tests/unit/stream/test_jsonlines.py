"""JSON lines of committed batches: a mutation's provenance shows only where it was captured."""

from __future__ import annotations

import json

from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.jsonlines import json_lines
from tests._positions import after


def _batch(*mutations: stream_pb2.Mutation) -> CommittedBatch:
    return CommittedBatch(
        node=bytes(range(16)),
        batch_id=3,
        begin=stream_pb2.Begin(),
        mutations=mutations,
        position=after(9, publisher=b"p", sequence=1),
    )


def test_provenance_is_shown_with_what_was_not_available_as_null() -> None:
    stamped = stream_pb2.Mutation(schema="s", table="t", operation=stream_pb2.Mutation.INSERT)
    stamped.provenance.current_user = 'clerk "a"'
    stamped.provenance.session_user = "login"
    stamped.provenance.application_name = "till"
    stamped.provenance.query_id = -42
    stamped.provenance.annotation = "req-42"
    plain = stream_pb2.Mutation(schema="s", table="u", operation=stream_pb2.Mutation.INSERT)
    empty = stream_pb2.Mutation(schema="s", table="v", operation=stream_pb2.Mutation.INSERT)
    empty.provenance.SetInParent()
    lines = [json.loads(line) for line in json_lines(_batch(stamped, plain, empty))]
    assert lines[0]["provenance"] == {
        "current_user": 'clerk "a"',
        "session_user": "login",
        "application_name": "till",
        "client_addr": None,
        "query_id": -42,
        "annotation": "req-42",
    }
    assert "provenance" not in lines[1]
    assert lines[2]["provenance"] == {
        "current_user": "",
        "session_user": "",
        "application_name": "",
        "client_addr": None,
        "query_id": None,
        "annotation": None,
    }
