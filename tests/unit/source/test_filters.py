"""A ``--where`` filter is one expression: the scanner finds every ';' and stray ')' that
PostgreSQL's lexer would, and none inside literals, quoted identifiers or comments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import ConfigurationError
from pgshovel.source import check_filter_text
from pgshovel.source._filters import filter_sql

ACCEPTED = [
    "id % 7 = 0",
    "random() < 0.5",
    "current_database() = 'copy'",
    "name = 'a;b)'",
    "name = 'it''s; fine)'",
    r"note = E'it\'s; fine)'",
    "note = e'a\\\\'",
    r"path = '\' OR true",  # standard strings: a backslash is just a backslash
    "x = $$a;)$$",
    "x = $tag$ ; ) $tag$",
    "x = $a$ $b$ ; $b$ ) $a$",
    '"weird;col)" > 1',
    '"say ""hi"";" = 1',
    "-- a comment; with )\n id > 1",
    "/* ; /* nested ) */ still ; */ id > 1",
    "a$b = 1 AND c$$ = 2",
    "(id > 1) AND (id < 5)",
    "U&'\\0041;' = 'A'",
    "id = ANY('{1,2}')",
    "$1 = 1",  # a parameter: PostgreSQL refuses it, the scanner need not
    "b'101' = b'101' AND x'1f' = x'1f' AND n'x;' = 'x;'",
]

REFUSED = [
    ("true); CREATE TABLE pwned (); SELECT (1", "')' closes a parenthesis"),
    ("true; CREATE TABLE pwned (); SELECT (1)", "';' ends a statement"),
    ("1; DROP TABLE t", "';' ends a statement"),
    ("true) OR (true", "')' closes a parenthesis"),
    ("true) UNION SELECT secret FROM t WHERE (true", "')' closes a parenthesis"),
    ("((true)", "a parenthesis is not closed"),
    ("'unterminated", "unterminated string constant"),
    (r"E'\'; DROP TABLE t", "unterminated string constant"),
    ("r'\\'; DROP TABLE t; --", "';' ends a statement"),
    ('"open', "unterminated quoted identifier"),
    ("$$open ; )", "unterminated dollar-quoted string"),
    ("/* open ; ) /* */", "unterminated comment"),
    ("", "it is empty"),
    ("  -- only a comment\n", "it is empty"),
    ("true\x00", "NUL"),
]


@pytest.mark.parametrize("where", ACCEPTED)
def test_one_expression_is_accepted(where: str) -> None:
    assert check_filter_text(where) == where


@pytest.mark.parametrize(("where", "reason"), REFUSED, ids=[w for w, _ in REFUSED])
def test_anything_that_could_end_or_escape_the_expression_is_refused(
    where: str, reason: str
) -> None:
    with pytest.raises(ConfigurationError, match="a filter is one boolean expression") as found:
        check_filter_text(where)
    assert reason in str(found.value)
    assert str(found.value).startswith(f"--where {where!r}: ")


def test_the_sql_holds_the_filter_in_parentheses() -> None:
    assert repr(filter_sql("id > 1 -- the rest")) == (
        "Composed([SQL('('), SQL('id > 1 -- the rest'), SQL('\\n)')])"
    )
    with pytest.raises(ConfigurationError):
        filter_sql("1); SELECT (1")


@settings(deadline=None, max_examples=300)
@given(st.text(alphabet="ab;()'\"$-*/\\eE \n", max_size=24))
def test_whatever_is_accepted_has_no_statement_end_outside_literals(where: str) -> None:
    try:
        check_filter_text(where)
    except ConfigurationError:
        return
    # Accepted: every ';' and parenthesis outside quotes is balanced as the scanner saw it;
    # the simplest witness is that the text has no ';' at all unless some quote is present.
    if not any(mark in where for mark in ("'", '"', "$", "--", "/*")):
        assert ";" not in where
        assert where.count("(") == where.count(")")
