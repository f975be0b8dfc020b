"""The exception hierarchy: one root, a subclass per kind of failure.

Messages are lowercase, say what failed and the state it was in, and show
values with ``!r``; wrap lower-level errors with ``raise ... from``.
"""

from __future__ import annotations


class PgshovelError(Exception):
    """Root of every error pgshovel raises on purpose."""


class ConfigurationError(PgshovelError):
    """A configuration file or value is invalid; the message names it and what is expected."""


class ComponentError(ConfigurationError):
    """A ``path: module:Name`` component could not be loaded or configured."""


class CodecError(PgshovelError):
    """A value could not be converted between PostgreSQL text and the protocol."""


class SandboxError(PgshovelError):
    """The local stack could not be started, reached or stopped."""


class DatabaseError(PgshovelError):
    """A database operation failed or a database is not set up as required."""


class VersionConflict(PgshovelError):
    """Somebody else changed the configuration since it was read."""


class StreamError(PgshovelError):
    """The stream broke its protocol (gap, duplicate, stale epoch, bad order)."""


class RelayError(PgshovelError):
    """The relay could not publish a batch."""


class ReplicationError(PgshovelError):
    """The replication worker could not load or apply."""
