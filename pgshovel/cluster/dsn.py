"""Showing connection strings without their secrets.

A DSN may hold a password (``password=...`` or ``user:secret@host`` in a URI);
every DSN pgshovel prints or logs goes through ``mask_dsn`` first. A set's DSN
is stored in ZooKeeper, so it may hold no password at all (``refuse_password``);
sets stored by older versions are flagged (``stored_password_warning``).
"""

from __future__ import annotations

import psycopg2
from psycopg2.extensions import make_dsn, parse_dsn

from pgshovel.errors import ConfigurationError

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


#: What to do instead of a password in a set's DSN (the DSN is stored in ZooKeeper).
LOCAL_LOGIN_REMEDY = (
    "let each process find the password locally instead: a passfile (~/.pgpass, or "
    "passfile=PATH in the dsn), a service=NAME defined in each machine's pg_service.conf, "
    "or PGPASSWORD in each process's environment"
)


def has_password(dsn: str) -> bool:
    """Whether ``dsn`` (key=value or URI form) carries a non-empty password."""
    try:
        parameters = parse_dsn(dsn)
    except psycopg2.ProgrammingError:
        return False
    return bool(parameters.get("password"))


def refuse_password(set_name: str, dsn: str) -> None:
    """Refuse to store a set whose DSN holds a password: ZooKeeper would keep it in clear."""
    if has_password(dsn):
        raise ConfigurationError(
            f"set {set_name!r}: database.dsn {mask_dsn(dsn)!r} holds a password, which would "
            f"be stored in zookeeper; remove it and {LOCAL_LOGIN_REMEDY}"
        )


def stored_password_warning(set_name: str, dsn: str) -> str | None:
    """A warning for a set stored with a password (by an older pgshovel), else None."""
    if not has_password(dsn):
        return None
    return (
        f"set {set_name!r} keeps a password in its zookeeper node (database.dsn "
        f"{mask_dsn(dsn)!r}); remove it with 'pgshovel-admin set update' and {LOCAL_LOGIN_REMEDY}"
    )
