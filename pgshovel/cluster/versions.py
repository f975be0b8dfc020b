"""Versions: the hash that names a set configuration, and pgshovel release ordering.

A set version is the first 16 hex digits of the SHA-256 of the set's
deterministic protobuf serialization, so equal configurations always get the
same version and any change gets a new one. Release versions ("0.1.0") are
compared numerically to refuse downgrades.
"""

from __future__ import annotations

import hashlib
import re

from pgshovel.protocol import configuration_pb2

SET_VERSION_DIGITS = 16

_LEADING_NUMBER = re.compile(r"\d+")


def set_version(configuration: configuration_pb2.ReplicationSetConfiguration) -> str:
    """The version of a set configuration: a short hash of its serialized form."""
    serialized = configuration.SerializeToString(deterministic=True)
    return hashlib.sha256(serialized).hexdigest()[:SET_VERSION_DIGITS]


def release_key(version: str) -> tuple[int, ...]:
    """An orderable key for a release string; non-numeric parts count as 0."""
    key: list[int] = []
    for part in version.split("."):
        match = _LEADING_NUMBER.match(part)
        key.append(int(match.group()) if match else 0)
    while key and key[-1] == 0:  # "1.0" and "1.0.0" are the same release
        key.pop()
    return tuple(key)


def is_newer(version: str, than: str) -> bool:
    """Whether release ``version`` is newer than release ``than``."""
    return release_key(version) > release_key(than)
