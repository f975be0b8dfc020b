"""Showing connection strings without their secrets, and keeping secrets out of ZooKeeper.

A DSN may hold secrets: a password (``password=...`` or ``user:secret@host`` in
a URI), a client key's passphrase (``sslpassword=...``), and whatever libpq
adds later. Which keywords are secret is libpq's own word: its option list
(``PQconndefaults``) flags them for hiding (display character ``*``), read
once from the libpq this process runs with, plus ``MAINTAINED_SECRETS`` for a
libpq that cannot be read. Every DSN pgshovel prints or logs goes through
``mask_dsn`` first. A set's DSN is stored in ZooKeeper, so it may hold no
secret at all (``refuse_password``, for every secret); sets stored by older
versions are flagged (``stored_password_warning``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

import psycopg2
from psycopg2.extensions import make_dsn, parse_dsn

from pgshovel.errors import ConfigurationError

logger = logging.getLogger(__name__)

MASK = "********"

#: Secret keywords known without asking libpq: today's and those of libpq 18
#: (OAuth), so they are refused even by a pgshovel running an older libpq.
MAINTAINED_SECRETS = frozenset({"password", "sslpassword", "oauth_client_secret"})


class _ConninfoOption(ctypes.Structure):
    """libpq's ``PQconninfoOption`` (libpq-fe.h)."""

    _fields_ = [
        ("keyword", ctypes.c_char_p),
        ("envvar", ctypes.c_char_p),
        ("compiled", ctypes.c_char_p),
        ("val", ctypes.c_char_p),
        ("label", ctypes.c_char_p),
        ("dispchar", ctypes.c_char_p),
        ("dispsize", ctypes.c_int),
    ]


def _loaded_libpq() -> str | None:
    """The path of the libpq psycopg2 runs with (mapped into this process), else libpq's
    usual name on this system."""
    import psycopg2._psycopg  # noqa: F401 - maps libpq into the process

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/libpq" in path and ".so" in path:
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("pq")


def libpq_secrets() -> frozenset[str]:
    """The keywords libpq flags as secrets (``dispchar`` ``*``); empty if it cannot be read."""
    path = _loaded_libpq()
    if path is None:
        return frozenset()
    try:
        library = ctypes.CDLL(path)
        defaults = library.PQconndefaults
        release = library.PQconninfoFree
    except (OSError, AttributeError) as error:
        logger.debug("cannot read libpq's options from %s: %s", path, error)
        return frozenset()
    defaults.restype = ctypes.POINTER(_ConninfoOption)
    release.argtypes = [ctypes.POINTER(_ConninfoOption)]
    options = defaults()
    if not options:
        return frozenset()
    found = set()
    try:
        index = 0
        while options[index].keyword is not None:
            option = options[index]
            if option.dispchar == b"*":
                found.add(option.keyword.decode("ascii"))
            index += 1
    finally:
        release(options)
    return frozenset(found)


@functools.cache
def secret_keywords() -> frozenset[str]:
    """Every connection keyword whose value is a secret (see the module documentation)."""
    return MAINTAINED_SECRETS | libpq_secrets()


def mask_dsn(dsn: str) -> str:
    """Return ``dsn`` in ``key=value`` form with every secret replaced by a mask."""
    try:
        parameters = parse_dsn(dsn)
    except psycopg2.ProgrammingError:
        return "<unparseable dsn>"
    for keyword in secret_keywords() & parameters.keys():
        parameters[keyword] = MASK
    return str(make_dsn(**parameters))


#: What to do instead of a password in a set's DSN (the DSN is stored in ZooKeeper).
LOCAL_LOGIN_REMEDY = (
    "let each process find the password locally instead: a passfile (~/.pgpass, or "
    "passfile=PATH in the dsn), a service=NAME defined in each machine's pg_service.conf, "
    "or PGPASSWORD in each process's environment"
)


def secrets_in(dsn: str) -> list[str]:
    """The secret keywords ``dsn`` (key=value or URI form) carries with a non-empty value."""
    try:
        parameters = parse_dsn(dsn)
    except psycopg2.ProgrammingError:
        return []
    return sorted(keyword for keyword in secret_keywords() if parameters.get(keyword))


def has_password(dsn: str) -> bool:
    """Whether ``dsn`` carries a non-empty secret: a password or any other (``sslpassword``)."""
    return bool(secrets_in(dsn))


def _holds(dsn: str) -> tuple[str, str] | None:
    """(what ``dsn`` holds, what to do instead) when it carries a secret."""
    found = secrets_in(dsn)
    if not found:
        return None
    if found == ["password"]:
        return "a password", LOCAL_LOGIN_REMEDY
    named = ", ".join(f"{keyword}=..." for keyword in found)
    return (
        f"a secret ({named})",
        "let each process find it locally instead: service=NAME in the dsn, with "
        f"{named} in NAME's section of each machine's pg_service.conf (PGSERVICEFILE names "
        "the file)",
    )


def refuse_password(set_name: str, dsn: str) -> None:
    """Refuse to store a set whose DSN holds a secret: ZooKeeper would keep it in clear."""
    holds = _holds(dsn)
    if holds is not None:
        what, remedy = holds
        raise ConfigurationError(
            f"set {set_name!r}: database.dsn {mask_dsn(dsn)!r} holds {what}, which would "
            f"be stored in zookeeper; remove it and {remedy}"
        )


def stored_password_warning(set_name: str, dsn: str) -> str | None:
    """A warning for a set stored with a secret (by an older pgshovel), else None."""
    holds = _holds(dsn)
    if holds is None:
        return None
    what, remedy = holds
    return (
        f"set {set_name!r} keeps {what} in its zookeeper node (database.dsn "
        f"{mask_dsn(dsn)!r}); remove it with 'pgshovel-admin set update' and {remedy}"
    )
