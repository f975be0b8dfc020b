"""A ``set resnapshot --where`` filter: one boolean expression over a table's captured columns.

The filter is SQL an operator wrote, and whoever may write a request in
ZooKeeper may write one: it must never be more than an expression, and it must
never get the rights of the role that evaluates it. So, before it runs
anywhere (in ``pgshovel-admin`` before the request is written, in the worker
before it takes the request, and every time a chunk is built), the text is
scanned the way PostgreSQL's lexer scans it (``standard_conforming_strings``
on, which every statement holding a filter sets): outside string constants,
quoted identifiers, dollar quotes and comments there is no ``;`` and no
parenthesis closing one the filter did not open, so it cannot end the
statement it is put into. PostgreSQL then parses and plans it (``EXPLAIN``,
which runs nothing) against a subquery holding only the captured columns: it
must be a boolean expression of them, without subqueries; and it only ever
runs in read-only transactions, so no function it calls can write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from pgshovel.errors import ConfigurationError
from pgshovel.source._connection import first_line, is_unavailable, translate
from pgshovel.source._ranges import own_rows
from pgshovel.source._shape import TableShape

#: The session setting the scanner's idea of a string constant needs.
STANDARD_STRINGS = sql.SQL("SET LOCAL standard_conforming_strings = on")

_IDENTIFIER_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENTIFIER_PART = _IDENTIFIER_START | set("0123456789$")
#: Plan nodes a filter on one table may produce (scans of it, bitmaps, a one-time filter).
_PLAN_NODES = frozenset(
    {
        "Seq Scan",
        "Index Scan",
        "Index Only Scan",
        "Bitmap Heap Scan",
        "Bitmap Index Scan",
        "BitmapAnd",
        "BitmapOr",
        "Tid Scan",
        "Tid Range Scan",
        "Result",
        "Append",
        "Gather",
    }
)


def _identifier_char(char: str, start: bool) -> bool:
    return char in (_IDENTIFIER_START if start else _IDENTIFIER_PART) or ord(char) >= 0x80


class _Scanner:
    """PostgreSQL's lexical structure, just enough to find ``;`` and parentheses."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        #: whether anything but whitespace and comments was met
        self.content = False

    def fail(self, problem: str) -> ConfigurationError:
        return ConfigurationError(
            f"--where {self.text!r}: {problem}; a filter is one boolean expression over the "
            "table's captured columns"
        )

    def tokens(self) -> Iterator[str]:
        """The characters outside literals, comments and quoted identifiers that matter."""
        text, size = self.text, len(self.text)
        while self.at < size:
            char = text[self.at]
            ahead = text[self.at + 1] if self.at + 1 < size else ""
            if char == "-" and ahead == "-":
                end = text.find("\n", self.at)
                self.at = size if end < 0 else end + 1
            elif char == "/" and ahead == "*":
                self._comment()
            elif char.isspace():
                self.at += 1
            else:
                self.content = True
                yield from self._token(char)

    def _token(self, char: str) -> Iterator[str]:
        if char == "'":
            self._quoted("'", "string constant", backslash=False)
        elif char == '"':
            self._quoted('"', "quoted identifier", backslash=False)
        elif char == "$":
            self._dollar()
        elif _identifier_char(char, start=True):
            self._identifier()
        else:
            self.at += 1
            if char in ";()":
                yield char

    def _identifier(self) -> None:
        text, start = self.text, self.at
        while self.at < len(text) and _identifier_char(text[self.at], start=False):
            self.at += 1
        word = text[start : self.at].lower()
        following = text[self.at : self.at + 1]
        if following == "'" and word in ("e", "b", "x", "n"):
            self._quoted("'", "string constant", backslash=word == "e")
        elif word == "u" and text[self.at : self.at + 2] in ("&'", '&"'):
            self.at += 1
            quote = text[self.at]
            self._quoted(quote, "string constant" if quote == "'" else "quoted identifier", False)

    def _quoted(self, quote: str, what: str, backslash: bool) -> None:
        text, start = self.text, self.at
        self.at += 1
        while self.at < len(text):
            char = text[self.at]
            if backslash and char == "\\":
                self.at += 2
                continue
            if char == quote:
                if text[self.at + 1 : self.at + 2] == quote:
                    self.at += 2
                    continue
                self.at += 1
                return
            self.at += 1
        raise self.fail(f"unterminated {what} at character {start + 1}")

    def _comment(self) -> None:
        text, start, depth = self.text, self.at, 0
        while self.at < len(text):
            pair = text[self.at : self.at + 2]
            if pair == "/*":
                depth += 1
                self.at += 2
            elif pair == "*/":
                depth -= 1
                self.at += 2
                if depth == 0:
                    return
            else:
                self.at += 1
        raise self.fail(f"unterminated comment at character {start + 1}")

    def _dollar(self) -> None:
        text, start = self.text, self.at
        end = start + 1
        if end < len(text) and text[end].isdigit():
            self.at = end  # $1: a parameter (PostgreSQL refuses it: no parameter is bound)
            return
        while (
            end < len(text) and text[end] != "$" and _identifier_char(text[end], end == start + 1)
        ):
            end += 1
        if text[end : end + 1] != "$":
            self.at = start + 1
            return
        tag = text[start : end + 1]
        close = text.find(tag, end + 1)
        if close < 0:
            raise self.fail(f"unterminated dollar-quoted string at character {start + 1}")
        self.at = close + len(tag)


def check_filter_text(where: str) -> str:
    """``where`` if it can only be one expression inside parentheses, else a
    ``ConfigurationError`` saying why (pure: nothing is sent anywhere)."""
    scanner = _Scanner(where)
    if "\x00" in where:
        raise scanner.fail("it holds a NUL character")
    depth = 0
    for mark in scanner.tokens():
        if mark == ";":
            raise scanner.fail("';' ends a statement, and a filter is never more than one")
        depth += 1 if mark == "(" else -1
        if depth < 0:
            raise scanner.fail("')' closes a parenthesis the filter did not open")
    if depth:
        raise scanner.fail("a parenthesis is not closed")
    if not scanner.content:
        raise scanner.fail("it is empty")
    return where


def filter_sql(where: str) -> sql.Composable:
    """The filter as SQL, in parentheses, once ``check_filter_text`` accepts it (a line
    comment at its end ends with it)."""
    return sql.SQL("({}\n)").format(sql.SQL(check_filter_text(where)))


def captured_rows(table: TableShape, condition: sql.Composable | None = None) -> sql.Composable:
    """``(SELECT <captured columns> FROM ONLY table [WHERE condition]) AS <table name>``:
    what a filter may see of the table (its own rows), under the table's own name."""
    query = sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names),
        own_rows(table),
    )
    if condition is not None:
        query = sql.SQL("{} WHERE {}").format(query, condition)
    return sql.SQL("({}) AS {}").format(query, sql.Identifier(table.name))


def _reason(error: psycopg2.Error) -> str:
    """PostgreSQL's message without its severity ("column "x" does not exist")."""
    return first_line(error).removeprefix("ERROR:").strip()


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans") or ():
        yield from _plan_nodes(child)


def check_filter(connection: Connection, table: TableShape, where: str) -> None:
    """Have PostgreSQL parse and plan the filter on ``table``'s captured columns, in a
    read-only transaction that is rolled back; a ``ConfigurationError`` naming table and
    cause when it is not one boolean expression of them without subqueries.
    ``connection`` is in autocommit mode."""
    check_filter_text(where)
    explain = sql.SQL("EXPLAIN (FORMAT JSON, VERBOSE) SELECT 1 FROM {} WHERE {}").format(
        captured_rows(table), filter_sql(where)
    )
    label = f"--where {where!r} on {table.qualified}"
    try:
        with connection.cursor() as cursor:
            cursor.execute("BEGIN READ ONLY")
            try:
                cursor.execute(STANDARD_STRINGS)
                cursor.execute(explain)
                document = cursor.fetchone()[0]  # type: ignore[index]
            finally:
                cursor.execute("ROLLBACK")
    except psycopg2.Error as error:
        if is_unavailable(error):
            raise translate(error, f"checking {label}") from error
        raise ConfigurationError(
            f"{label}: {_reason(error)} (a filter sees only the columns the set captures: "
            f"{', '.join(table.column_names)})"
        ) from error
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    for node in _plan_nodes(plan):
        if node.get("Parent Relationship") in ("SubPlan", "InitPlan") or "Subplan Name" in node:
            raise ConfigurationError(f"{label}: a filter may not hold a subquery")
        if node.get("Node Type") not in _PLAN_NODES:
            raise ConfigurationError(
                f"{label}: a filter may only test the table's own rows (its plan needs a "
                f"{node.get('Node Type')!r} node: a subquery or another table)"
            )
