"""Mutation events encoded to bytes (QueueEventDecoder.encode_mutation) are the built Mutations'."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.events import QueueEvent, QueueEventDecoder, build_mutation
from pgshovel.stream.provenance import ProvenanceResolver
from tests.unit.relay.test_events import _decoder
from tests.unit.stream.test_codec_fill import SAMPLES

MIXED = {
    "id": "int8",
    "n": "int4",
    "price": "numeric",
    "at": "timestamptz",
    "day": "date",
    "ok": "bool",
    "tags": "_text",
    "doc": "jsonb",
    "addr": "inet",
    "note": "text",
}
TEXTS: dict[str, list[str]] = {}
for _type, _text in SAMPLES:
    TEXTS.setdefault(_type, []).append(_text)
TEXTS["note"] = ["", "zoë", "x" * 127, "y" * 128, "z" * 20_000]


def _texts(type_name: str) -> st.SearchStrategy[str]:
    return st.sampled_from(TEXTS.get(type_name, ["10.0.0.1/8", "", "some text"]))


@st.composite
def rows(draw: st.DrawFn) -> dict[str, str | None] | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    row: dict[str, str | None] = {}
    for name in draw(st.permutations(list(MIXED))):
        if draw(st.integers(0, 4)) == 0:
            continue  # a column the trigger did not capture
        if draw(st.integers(0, 5)) == 0:
            row[name] = None
        else:
            row[name] = draw(_texts(name if name == "note" else MIXED[name]))
    return row


def _queue_event(
    kind: str, old: Any, new: Any, event_id: int = 7, keys: str | None = '["id"]', **fields: Any
) -> QueueEvent:
    values: dict[str, Any] = {
        "id": event_id,
        "time": 1_700_000_000_123_456,
        "txid": 901,
        "type": kind,
        "data": json.dumps([old, new]),
        "extra1": "Sales",
        "extra2": "Or ders",
        "extra3": "abc",
        "extra4": keys,
    }
    values.update(fields)
    return QueueEvent(**values)


def _encoded(decoder: QueueEventDecoder, event: QueueEvent) -> bytes:
    encoded = decoder.encode_mutation(tuple(event))
    assert encoded is not None
    return encoded


def _expected(event: QueueEvent) -> bytes:
    old, new = json.loads(event.data) if event.data else (None, None)
    keys = json.loads(event.extra4 or "[]")
    return build_mutation(event, [old, new], MIXED, keys).SerializeToString()


@given(
    st.sampled_from("IUDT"),
    rows(),
    rows(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**64 - 1),
    st.sampled_from(["", "v1", "ünï"]),
    st.sampled_from([None, "[]", '["id"]', '["id", ""]', '["a", "b c"]']),
    st.sampled_from([("", ""), ("Sales", "Or ders"), ("s", "")]),
)
def test_encoding_gives_the_bytes_of_the_built_mutation(
    kind: str,
    old: dict[str, str | None] | None,
    new: dict[str, str | None] | None,
    event_id: int,
    time: int,
    txid: int,
    version: str,
    keys: str | None,
    table: tuple[str, str],
) -> None:
    decoder, _ = _decoder({table: MIXED})
    event = _queue_event(
        kind, old, new, event_id, keys, time=time, txid=txid, extra3=version or None
    )
    event = event._replace(extra1=table[0] or None, extra2=table[1] or None)
    encoded = _encoded(decoder, event)
    assert encoded == _expected(event)
    message = stream_pb2.Message()
    decoder.decode_into(tuple(event), message)
    assert message.operation.mutation.SerializeToString() == encoded


def test_columns_the_plan_does_not_know_follow_as_unknown_with_their_text() -> None:
    decoder, catalog = _decoder({("Sales", "Or ders"): MIXED})
    # A table without history reloads the catalog when a row names a new column; a
    # table that does not exist any more decodes every column as unknown.
    catalog.tables.pop(("Sales", "Or ders"))
    event = _queue_event("I", None, {"gone": "x y", "id": None, "long": "é" * 100})
    encoded = _encoded(decoder, event)
    mutation = stream_pb2.Mutation.FromString(encoded)
    assert [(c.name, c.value.WhichOneof("kind")) for c in mutation.new.columns] == [
        ("gone", "other"),
        ("id", "null"),
        ("long", "other"),
    ]
    assert mutation.new.columns[2].value.other == stream_pb2.Other(type="unknown", text="é" * 100)
    built = build_mutation(event, [None, json.loads(event.data or "")[1]], {}, ["id"])
    assert encoded == built.SerializeToString()


def test_an_empty_row_is_left_out_as_the_runtime_leaves_it_out() -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    mutation = stream_pb2.Mutation.FromString(_encoded(decoder, _queue_event("D", {}, None)))
    assert not mutation.HasField("old") and not mutation.HasField("new")


@pytest.mark.parametrize(
    ("new", "message"),
    [
        ({"n": "2147483648"}, r"cannot decode int4 text '2147483648': integer out of range"),
        ({"at": "soon"}, r"cannot decode timestamptz text 'soon'"),
        ({"n": 5}, r"cannot decode int4 text '5'"),
        ({"note": ["a"]}, r"cannot decode text text \"\['a'\]\""),
    ],
)
def test_a_value_an_encoder_rejects_is_a_codec_error_naming_type_and_text(
    new: dict[str, Any], message: str
) -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    with pytest.raises(CodecError, match=message):
        decoder.encode_mutation(tuple(_queue_event("I", None, new)))


def test_an_unknown_event_type_is_a_codec_error() -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    with pytest.raises(CodecError, match="type 'X'"):
        decoder.encode_mutation(tuple(_queue_event("X", None, {"id": "1"})))


def test_schema_events_and_watermarks_are_not_encoded_here() -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    assert decoder.encode_mutation(tuple(_queue_event("S", None, None))) is None
    assert decoder.encode_mutation(tuple(_queue_event("W", None, None))) is None


def test_a_reloaded_table_gets_a_new_encoding_plan() -> None:
    decoder, catalog = _decoder({("Sales", "Or ders"): {"id": "int8"}})
    decoder.encode_mutation(tuple(_queue_event("I", None, {"id": "1"})))
    catalog.tables[("Sales", "Or ders")] = {"id": "int8", "n": "int4"}
    encoded = _encoded(decoder, _queue_event("I", None, {"id": "1", "n": "2"}))
    columns = stream_pb2.Mutation.FromString(encoded).new.columns
    assert [(c.name, c.value.WhichOneof("kind")) for c in columns] == [
        ("id", "int64"),
        ("n", "int64"),
    ]


_PROVENANCE_TEXTS = st.sampled_from(["", "app", 'ro"le\\x', "zoë ü", "x" * 200])


@st.composite
def provenances(draw: st.DrawFn) -> dict[str, Any]:
    """A provenance object as the capture trigger writes it (sql/capture.sql)."""
    found = {
        "u": draw(_PROVENANCE_TEXTS),
        "s": draw(_PROVENANCE_TEXTS),
        "a": draw(_PROVENANCE_TEXTS),
        "c": draw(st.sampled_from([None, "127.0.0.1", "::1"])),
        "q": draw(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))),
        "n": draw(st.one_of(st.none(), _PROVENANCE_TEXTS)),
    }
    # The trigger leaves out what says nothing ("u" when it is "s").
    left_out = draw(st.sets(st.sampled_from(["u", "a", "c", "q", "n"])))
    return {key: value for key, value in found.items() if key not in left_out}


@given(st.sampled_from("IUDT"), rows(), rows(), provenances())
def test_provenance_encodes_to_the_bytes_of_the_built_mutation(
    kind: str,
    old: dict[str, str | None] | None,
    new: dict[str, str | None] | None,
    provenance: dict[str, Any],
) -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    event = _queue_event(kind, old, new)._replace(data=json.dumps([old, new, provenance]))
    encoded = _encoded(decoder, event)
    built = build_mutation(event, [old, new, provenance], MIXED, ["id"])
    assert encoded == built.SerializeToString()
    mutation = stream_pb2.Mutation.FromString(encoded)
    assert mutation.HasField("provenance")
    got = mutation.provenance
    assert (got.current_user, got.session_user, got.application_name) == (
        provenance.get("u", provenance["s"]),
        provenance["s"],
        provenance.get("a") or "",
    )
    assert got.client_addr == (provenance.get("c") or "")
    assert got.query_id == (provenance.get("q") or 0)
    assert got.annotation == (provenance.get("n") or "")
    # The same event without provenance: no provenance field, the rest the same bytes.
    plain = _encoded(decoder, event._replace(data=json.dumps([old, new])))
    assert not stream_pb2.Mutation.FromString(plain).HasField("provenance")
    assert encoded.startswith(plain)


@pytest.mark.parametrize(
    "data",
    [
        '[null, {"id": "1"}, []]',
        '[null, {"id": "1"}, {"u": 5}]',
        '[null, {"id": "1"}, {"q": "12"}]',
        '[null, {"id": "1"}, {"q": 9223372036854775808}]',
        '[null, {"id": "1"}, {}, {}]',
        '[null, {"id": "1"}, 2]',
        '[null, {"id": "1"}, true]',
        '[null, {"id": "1"}, 1.0]',
    ],
)
def test_malformed_provenance_is_a_codec_error_naming_the_event(data: str) -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    with pytest.raises(CodecError, match="event 7"):
        decoder.encode_mutation(tuple(_queue_event("I", None, None)._replace(data=data)))


def test_a_statements_later_events_take_their_transactions_previous_provenance() -> None:
    """[old, new, 1]: the provenance of the previous event of the same transaction, even
    with other transactions' events in between."""
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    first = {"s": "alice", "a": "web", "q": 42, "n": "req-1"}
    other = {"s": "bob"}

    def event(event_id: int, txid: int, third: Any) -> QueueEvent:
        data = json.dumps([None, {"id": str(event_id)}, third])
        return _queue_event("I", None, None, event_id=event_id, txid=txid, data=data)

    decoded = [
        stream_pb2.Mutation.FromString(_encoded(decoder, e))
        for e in (event(1, 900, first), event(2, 901, other), event(3, 900, 1), event(4, 901, 1))
    ]
    # The later events refer to their transaction's first one instead of copying it...
    assert [m.provenance_of for m in decoded] == [0, 0, 1, 2]
    assert not decoded[2].HasField("provenance")
    # ...which a reader resolves (the stream validator does) into the same provenance.
    resolver = ProvenanceResolver()
    assert all(resolver.resolve(m) == "" for m in decoded)
    assert [(m.provenance.session_user, m.provenance.annotation) for m in decoded] == [
        ("alice", "req-1"),
        ("bob", ""),
        ("alice", "req-1"),
        ("bob", ""),
    ]
    assert decoded[2].provenance == decoded[0].provenance


def test_a_transactions_provenance_is_written_once_per_framing_of_its_batch() -> None:
    """Row triggers write the object on every event: still sent once, then referred to; a
    different provenance in the same transaction is sent in full; a batch published again
    (a retry decodes it from its first event) carries it in full again."""
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    big = {"s": "alice", "n": "x" * 100_000}
    changed = {"s": "alice", "n": "req-2"}

    def event(event_id: int, third: Any) -> QueueEvent:
        data = json.dumps([None, {"id": str(event_id)}, third])
        return _queue_event("I", None, None, event_id=event_id, txid=900, data=data)

    events = [event(1, big), event(2, big), event(3, 1), event(4, changed), event(5, big)]
    for _attempt in range(2):
        encoded = [_encoded(decoder, e) for e in events]
        decoded = [stream_pb2.Mutation.FromString(piece) for piece in encoded]
        assert [m.provenance_of for m in decoded] == [0, 1, 1, 0, 0]
        assert sum(map(len, encoded)) < 2 * 100_000 + 1_000
        resolver = ProvenanceResolver()
        assert all(resolver.resolve(m) == "" for m in decoded)
        assert [len(m.provenance.annotation) for m in decoded] == [100_000] * 3 + [5, 100_000]


def test_a_provenance_reference_without_its_transactions_earlier_event_is_an_error() -> None:
    decoder, _ = _decoder({("Sales", "Or ders"): MIXED})
    data = json.dumps([None, {"id": "1"}, 1])
    with pytest.raises(CodecError, match=r"event 7 takes the provenance .* transaction 902"):
        decoder.encode_mutation(tuple(_queue_event("I", None, None, txid=902, data=data)))
