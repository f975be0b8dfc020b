"""The net-effect reducer: last change per key wins, key changes, deletes and TRUNCATE."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.errors import ProgrammingError, StreamError
from pgshovel.replication.changes import (
    Change,
    KeyedChange,
    NetEffect,
    Operation,
    reduce_changes,
    reduce_keyed,
)

KEY = (0,)
INS, U, D, T = Operation.INSERT, Operation.UPDATE, Operation.DELETE, Operation.TRUNCATE


def row(key: str, value: str) -> tuple[str, str]:
    return (key, value)


CASES = [
    ("insert", [Change(INS, new=row("1", "a"))], False, {("1",): row("1", "a")}),
    (
        "update after insert keeps the last row",
        [Change(INS, new=row("1", "a")), Change(U, old=row("1", "a"), new=row("1", "b"))],
        False,
        {("1",): row("1", "b")},
    ),
    (
        "insert then delete deletes",
        [Change(INS, new=row("1", "a")), Change(D, old=row("1", "a"))],
        False,
        {("1",): None},
    ),
    (
        "key change deletes the old key",
        [Change(U, old=row("1", "a"), new=row("2", "a"))],
        False,
        {("1",): None, ("2",): row("2", "a")},
    ),
    (
        "key moved onto a key deleted before",
        [Change(D, old=row("2", "x")), Change(U, old=row("1", "a"), new=row("2", "a"))],
        False,
        {("1",): None, ("2",): row("2", "a")},
    ),
    (
        "truncate forgets what came before",
        [Change(INS, new=row("1", "a")), Change(T), Change(INS, new=row("2", "b"))],
        True,
        {("2",): row("2", "b")},
    ),
    (
        "delete then re-insert upserts",
        [Change(D, old=row("1", "a")), Change(INS, new=row("1", "c"))],
        False,
        {("1",): row("1", "c")},
    ),
]


@pytest.mark.parametrize(
    ("changes", "truncate", "rows"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_reduce_changes_table(
    changes: list[Change], truncate: bool, rows: dict[tuple[str, ...], tuple[str, str] | None]
) -> None:
    effect = reduce_changes(changes, KEY)
    assert effect.truncate is truncate
    assert effect.rows == rows


def test_update_without_old_row_is_refused() -> None:
    with pytest.raises(StreamError, match="UPDATE change has no old row"):
        Change(U, new=row("1", "a"))


def test_unkeyed_tables_cannot_be_reduced() -> None:
    with pytest.raises(ProgrammingError, match="unkeyed"):
        reduce_changes([Change(INS, new=row("1", "a"))], ())


def apply(effect: NetEffect, table: dict[str, str]) -> dict[str, str]:
    """What the target does with a net effect: truncate, delete touched keys, insert rows."""
    result = {} if effect.truncate else dict(table)
    for (key,), new in effect.rows.items():
        result.pop(str(key), None)
        if new is not None:
            result[str(new[0])] = str(new[1])
    return result


keys = st.sampled_from("abcde")


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, str], list[Change], dict[str, str]]:
    """A starting table, a valid sequence of changes on it, and the table afterwards."""
    start = draw(st.dictionaries(keys, st.text(max_size=3)))
    model = dict(start)
    changes: list[Change] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from([INS, U, D, T]))
        if kind is T:
            model.clear()
            changes.append(Change(T))
        elif kind is INS:
            key = draw(keys.filter(lambda k: k not in model)) if len(model) < 5 else None
            if key is None:
                continue
            value = draw(st.text(max_size=3))
            model[key] = value
            changes.append(Change(INS, new=(key, value)))
        elif model:
            key = draw(st.sampled_from(sorted(model)))
            old = (key, model.pop(key))
            if kind is D:
                changes.append(Change(D, old=old))
            else:
                new_key = draw(st.sampled_from([key, *sorted(set("abcde") - set(model))]))
                value = draw(st.text(max_size=3))
                model[new_key] = value
                changes.append(Change(U, old=old, new=(new_key, value)))
    return start, changes, model


@given(histories())
def test_net_effect_applied_to_the_start_equals_applying_every_change(
    history: tuple[dict[str, str], list[Change], dict[str, str]],
) -> None:
    start, changes, expected = history
    assert apply(reduce_changes(changes, KEY), start) == expected


@given(histories())
def test_an_update_that_keeps_its_key_may_leave_the_old_key_out(
    history: tuple[dict[str, str], list[Change], dict[str, str]],
) -> None:
    start, changes, expected = history

    def keyed(change: Change) -> KeyedChange[tuple[str | None, ...]]:
        old = None if change.old is None else (change.old[0],)
        new = None if change.new is None else (change.new[0],)
        if change.operation is U and old == new:
            old = None  # what the PostgreSQL target passes: the row is only written
        return change.operation is T, old, new, change.new

    assert apply(reduce_keyed(keyed(change) for change in changes), start) == expected
