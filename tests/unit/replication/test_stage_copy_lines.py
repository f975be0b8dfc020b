"""The PostgreSQL stage's reduce (``reduce_messages(copy=True)``) against the general one.

The copy reduce works on the messages' bytes and keeps each key's last change
as the stage's COPY line itself; for any micro-batch cut into any tasks it
must stage exactly the lines the general reduce's net effect makes (row or a
deleted key's key fields, place, deleted flag), report the same TRUNCATE and
count the same changes — for a one-field key (the inline loop), a key of two
fields not first in the row, and messages holding a keyed and an unkeyed table.
Damaged messages stay errors.
"""

from __future__ import annotations

import random

import pytest

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.staging.reduce import StagedTable, reduce_messages
from pgshovel.source import Column, TableShape
from pgshovel.stream.rows import RowsBuilder, copy_line
from tests._staged_rows import KEYED, Changes, Messages, cut, row_table

INSERT, UPDATE = stream_pb2.Mutation.INSERT, stream_pb2.Mutation.UPDATE
DELETE, TRUNCATE = stream_pb2.Mutation.DELETE, stream_pb2.Mutation.TRUNCATE

PAIR = TableShape(
    "public",
    "pair",
    (
        Column("note", "text", "text", False, 1),
        Column("b", "integer", "int4", True, 2),
        Column("a", "text", "text", True, 3),
    ),
    ("a", "b"),
)
JOURNAL = TableShape(
    "public",
    "journal",
    (Column("a", "integer", "int4", False, 1), Column("b", "text", "text", False, 2)),
    (),
)
NOTES = ["x", "tab\there", "back\\slash", None, "zoë", "\\N", ""]


def _general_lines(table: StagedTable) -> list[bytes]:
    """The stage's COPY lines of the general reduce's net effect (as ``_stage_keyed`` writes
    them without ``copy``)."""
    return sorted(
        f"{table.deleted_line(key) if deleted else line}\t{ordinal}\t{event}\t"
        f"{'t' if deleted else 'f'}\n".encode()
        for key, ((ordinal, event), deleted, line) in table.rows.items()
    )


def _same(task: Messages, shapes: dict[tuple[str, str], TableShape]) -> None:
    general = reduce_messages(task, shapes)
    fast = reduce_messages(task, shapes, copy=True)
    assert general.keys() == fast.keys()
    for identity, table in general.items():
        mine = fast[identity]
        assert not mine.rows
        assert sorted(mine.copy.values()) == _general_lines(table), identity
        assert mine.signed == table.signed
        assert (mine.truncated, mine.changes) == (table.truncated, table.changes)


@pytest.mark.parametrize("seed", range(20))
def test_a_one_field_key_stages_the_general_reduces_lines(seed: int) -> None:
    rng = random.Random(seed)
    changes = Changes(rng)
    for _ in range(4):
        parts, whole = changes.micro_batch(rng.randint(1, 5), rng.choice([1, 2, 4]))
        for task in [whole, *cut(rng, parts)]:
            _same(task, {KEYED.identity: KEYED})


def _pair_and_journal(rng: random.Random, batches: int) -> Messages:
    """Changes of PAIR (key ``(a, b)`` at positions 2 and 1) and JOURNAL, both in each
    message, as the relay encodes them."""
    pair, journal = row_table(PAIR), row_table(JOURNAL)
    rows: dict[tuple[str, str], str | None] = {}
    lines: list[list[str | None]] = []
    messages: Messages = []
    event = 0
    for ordinal in range(batches):
        builder = RowsBuilder()
        for _ in range(rng.randint(1, 20)):
            event += 1
            roll = rng.random()
            if roll < 0.05:
                rows.clear()
                builder.add(pair, event, TRUNCATE, 1, event, None, None, None)
                continue
            if roll < 0.3:
                line: list[str | None] = [str(rng.randrange(3)), rng.choice(NOTES)]
                old = rng.choice(lines) if lines and rng.random() < 0.5 else None
                operation = INSERT if old is None else rng.choice([UPDATE, DELETE])
                new = None if operation == DELETE else line
                builder.add(
                    journal,
                    event,
                    operation,
                    1,
                    event,
                    None if old is None else copy_line(old),
                    None if new is None else copy_line(new),
                    None,
                )
                lines.append(line)
                continue
            key = (rng.choice(["k", "l\tm", "\\N"]), str(rng.randrange(4)))
            note = rng.choice(NOTES)
            if key not in rows:
                rows[key] = note
                new_line = copy_line([note, key[1], key[0]])
                builder.add(pair, event, INSERT, 1, event, None, new_line, None)
                continue
            old_line = copy_line([rows[key], key[1], key[0]])
            if roll < 0.5:
                del rows[key]
                builder.add(pair, event, DELETE, 1, event, old_line, None, None)
                continue
            moved = (key[0], str(rng.randrange(4)))
            if moved != key and moved in rows:
                moved = key
            del rows[key]
            rows[moved] = note
            new_line = copy_line([note, moved[1], moved[0]])
            builder.add(pair, event, UPDATE, 1, event, old_line, new_line, None)
        payload = builder.take()
        if payload is not None:
            messages.append((ordinal, stream_pb2.MutationBatch.FromString(payload)))
    return messages


@pytest.mark.parametrize("seed", range(20))
def test_a_two_field_key_and_an_unkeyed_table_stage_the_general_reduces_lines(seed: int) -> None:
    rng = random.Random(seed)
    messages = _pair_and_journal(rng, rng.randint(1, 6))
    shapes = {PAIR.identity: PAIR, JOURNAL.identity: JOURNAL}
    for task in [messages, *cut(rng, [messages])]:
        _same(task, shapes)


def _damaged(table: int, operation: int) -> stream_pb2.MutationBatch:
    builder = RowsBuilder()
    builder.add(row_table(KEYED), 7, INSERT, 1, 1, None, copy_line(["1", "x"]), None)
    payload = builder.take()
    assert payload is not None
    message = stream_pb2.MutationBatch.FromString(payload)
    message.changes[0].table = table
    message.changes[0].operation = operation  # type: ignore[assignment]
    return message


@pytest.mark.parametrize(
    ("table", "operation", "problem"),
    [(1, INSERT, "names table 1 of a message holding 1 table"), (0, 9, "no valid operation")],
)
def test_a_damaged_change_is_an_error(table: int, operation: int, problem: str) -> None:
    with pytest.raises(StreamError, match=problem):
        reduce_messages([(0, _damaged(table, operation))], {KEYED.identity: KEYED}, copy=True)
