"""ZooKeeper credentials and ACLs, read from each process's environment (never from argv).

``PGSHOVEL_ZOOKEEPER_AUTH=digest:USER:PASSWORD`` (or
``PGSHOVEL_ZOOKEEPER_AUTH_FILE`` naming a file that holds that line) makes a
process authenticate with ZooKeeper's digest scheme, and every node it creates
gets a creator-only ACL: all permissions for that user, none for anybody else.
``PGSHOVEL_ZOOKEEPER_ACL`` replaces that ACL with explicit entries in
ZooKeeper's ``scheme:id:perms`` form, comma separated (``auth::cdrwa`` is the
creator, ``digest:USER:BASE64-SHA1:r`` another digest user, ``ip:10.0.0.0/8:r``
an address range). With neither variable, nodes are created open
(``world:anyone``), as before: fine for a local stack only. Parsing is pure; the
password is never part of an error message.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.security import ACL, CREATOR_ALL_ACL, Id

from pgshovel.errors import ConfigurationError

logger = logging.getLogger(__name__)

AUTH_VARIABLE = "PGSHOVEL_ZOOKEEPER_AUTH"
AUTH_FILE_VARIABLE = "PGSHOVEL_ZOOKEEPER_AUTH_FILE"
ACL_VARIABLE = "PGSHOVEL_ZOOKEEPER_ACL"

SUPPORTED_SCHEMES = ("digest",)
ACL_SCHEMES = ("auth", "digest", "ip", "world", "sasl", "x509")
_PERMISSIONS = {"r": 1, "w": 2, "c": 4, "d": 8, "a": 16}


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """How one process authenticates with ZooKeeper and protects the nodes it creates."""

    #: kazoo ``auth_data``: (scheme, credential) pairs; empty: unauthenticated
    auth: tuple[tuple[str, str], ...] = ()
    #: the ACL of every node this process creates; empty: ZooKeeper's open ACL
    acl: tuple[ACL, ...] = ()

    @property
    def identity(self) -> str:
        """Who this process is, for messages; never the password."""
        return identity(self.auth)

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for ``KazooClient``."""
        return {
            "auth_data": list(self.auth) or None,
            "default_acl": list(self.acl) or None,
        }


def identity(auth: Any) -> str:
    """``digest user 'name'`` for kazoo ``auth_data`` (pairs of scheme and credential)."""
    for scheme, credential in auth or ():
        return f"{scheme} user {str(credential).partition(':')[0]!r}"
    return "an unauthenticated client"


def parse_auth(text: str, source: str) -> tuple[str, str, str]:
    """``digest:USER:PASSWORD`` as (scheme, user, password); the password may hold ':'."""
    scheme, colon, rest = text.strip().partition(":")
    if scheme not in SUPPORTED_SCHEMES:
        # Without a ':' the whole value may be a password: never shown.
        shown = repr(scheme) if colon and scheme.isidentifier() else "(not shown)"
        raise ConfigurationError(
            f"{source}: unsupported zookeeper auth scheme {shown}; "
            "write digest:USER:PASSWORD (SASL is not supported yet)"
        )
    user, separator, password = rest.partition(":")
    if not user or not separator or not password:
        raise ConfigurationError(
            f"{source}: expected digest:USER:PASSWORD with a non-empty user and password"
        )
    return scheme, user, password


def parse_acl(text: str, source: str, authenticated: bool) -> tuple[ACL, ...]:
    """Comma-separated ``scheme:id:perms`` entries (ZooKeeper's setAcl syntax)."""
    entries = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        scheme, _, rest = item.partition(":")
        identifier, separator, letters = rest.rpartition(":")
        if scheme not in ACL_SCHEMES or not separator:
            raise ConfigurationError(
                f"{source}: entry {item!r}: expected scheme:id:perms with scheme one of "
                f"{list(ACL_SCHEMES)!r} (e.g. auth::cdrwa or digest:USER:HASH:r)"
            )
        if not letters or any(letter not in _PERMISSIONS for letter in letters):
            raise ConfigurationError(
                f"{source}: entry {item!r}: permissions must be letters of 'cdrwa', got {letters!r}"
            )
        if scheme == "auth" and not authenticated:
            raise ConfigurationError(
                f"{source}: entry {item!r} names the creator, but no credentials are given: "
                f"set {AUTH_VARIABLE} or {AUTH_FILE_VARIABLE}"
            )
        perms = sum(_PERMISSIONS[letter] for letter in set(letters))
        entries.append(ACL(perms, Id(scheme, identifier)))
    if not entries:
        raise ConfigurationError(f"{source}: no ACL entry given; unset it for the default")
    return tuple(entries)


def _read_auth_file(path: Path) -> str:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or type(error).__name__
        raise ConfigurationError(
            f"{AUTH_FILE_VARIABLE}: cannot read {str(path)!r}: {reason}"
        ) from error
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning(
            "%s: %s is accessible to other users (mode %o); chmod 600 it",
            AUTH_FILE_VARIABLE,
            path,
            stat.S_IMODE(mode),
        )
    return text


def from_environment(environ: Mapping[str, str] | None = None) -> ZooKeeperSecurity:
    """The ZooKeeper security settings of this process (see the module docstring)."""
    env = os.environ if environ is None else environ
    inline, file = env.get(AUTH_VARIABLE, ""), env.get(AUTH_FILE_VARIABLE, "")
    if inline and file:
        raise ConfigurationError(
            f"both {AUTH_VARIABLE} and {AUTH_FILE_VARIABLE} are set; set only one of them"
        )
    auth: tuple[tuple[str, str], ...] = ()
    if inline or file:
        source = AUTH_VARIABLE if inline else f"{AUTH_FILE_VARIABLE} ({file})"
        text = inline if inline else _read_auth_file(Path(file))
        scheme, user, password = parse_auth(text, source)
        auth = ((scheme, f"{user}:{password}"),)
    acl_text = env.get(ACL_VARIABLE, "")
    if acl_text:
        acl = parse_acl(acl_text, ACL_VARIABLE, authenticated=bool(auth))
    else:
        acl = tuple(CREATOR_ALL_ACL) if auth else ()
    return ZooKeeperSecurity(auth=auth, acl=acl)
