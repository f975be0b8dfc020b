"""Showing connection strings without their secrets.

A DSN may hold a password (``password=...`` or ``user:secret@host`` in a URI);
every DSN pgshovel prints or logs goes through ``mask_dsn`` first.
"""

from __future__ import annotations

import psycopg2
from psycopg2.extensions import make_dsn, parse_dsn

MASK = "********"


def mask_dsn(dsn: str) -> str:
    """Return ``dsn`` in ``key=value`` form with the password replaced by a mask."""
    try:
        parameters = parse_dsn(dsn)
    except psycopg2.ProgrammingError:
        return "<unparseable dsn>"
    if "password" in parameters:
        parameters["password"] = MASK
    return str(make_dsn(**parameters))
