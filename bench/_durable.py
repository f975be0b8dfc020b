"""Durable commits for a while: ``fsync`` and ``synchronous_commit`` on, then back as they were.

The sandbox runs PostgreSQL with both off, which hides what a commit costs on
a real server: a capture that writes more WAL per transaction may well cost
relatively less once every commit waits for its flush. :func:`durable` turns
both on with ``ALTER SYSTEM`` and a reload (``fsync`` is a reload setting),
checks with ``SHOW`` that the server took them, and always resets them and
checks again, on errors too. It only works on a server whose command line
does not set them (the sandbox writes them to an included file instead).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg2 import sql

from bench._stack import connect_autocommit

logger = logging.getLogger(__name__)

SETTINGS = ("fsync", "synchronous_commit")
TIMEOUT = 10.0


def _show(dsn: str) -> dict[str, str]:
    """The settings as a new session sees them."""
    conn = connect_autocommit(dsn)
    try:
        with conn.cursor() as cursor:
            values = {}
            for name in SETTINGS:
                cursor.execute(sql.SQL("SHOW {}").format(sql.Identifier(name)))
                row = cursor.fetchone()
                values[name] = "" if row is None else str(row[0])
    finally:
        conn.close()
    return values


def _apply(dsn: str, statements: list[sql.Composable], expected: dict[str, str]) -> None:
    """Run ``statements``, reload, and wait until a new session sees ``expected``."""
    conn = connect_autocommit(dsn)
    try:
        with conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
            cursor.execute("SELECT pg_reload_conf()")
    finally:
        conn.close()
    deadline = time.monotonic() + TIMEOUT
    while (seen := _show(dsn)) != expected:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the server shows {seen!r} {TIMEOUT:.0f}s after a reload, expected {expected!r}; "
                "are they set on its command line (a sandbox started before they moved to "
                "pgshovel-sandbox.conf)?"
            )
        time.sleep(0.05)


@contextmanager
def durable(dsn: str) -> Iterator[None]:
    """``fsync`` and ``synchronous_commit`` on for the server of ``dsn`` while the block runs."""
    before = _show(dsn)
    try:
        _apply(
            dsn,
            [sql.SQL("ALTER SYSTEM SET {} = on").format(sql.Identifier(name)) for name in SETTINGS],
            dict.fromkeys(SETTINGS, "on"),
        )
        logger.info("durable commits: %s on", " and ".join(SETTINGS))
        yield
    finally:
        _apply(
            dsn,
            [sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)) for name in SETTINGS],
            before,
        )
        logger.info("durable commits: back to %r", before)
