"""The exception hierarchy: one root, a family per kind of cause, the same class for the same cause.

Three families decide what a running process does with an error, and one
place applies that decision (``pgshovel.policy``):

* ``ConfigurationError``: a file, a value or the installation is wrong. Never
  retried; the message names the file or key and what to do.
* ``DataError``: this data cannot be handled as it is (undecodable value,
  broken stream, a schema the target cannot follow, a stored state that does
  not read). Follows ``on_error``:
  ``exit`` ends the process, ``log`` logs loudly and retries; nothing is ever
  dropped.
* ``TransientError``: something outside is unavailable for now (a database
  connection lost or refused, a server restarting, Kafka or ZooKeeper
  unreachable). Retried with backoff.

The rest are raised where they happen and end the command: ``DatabaseError``
(a statement failed for a lasting reason: privileges, a missing object),
``VersionConflict``, ``AlreadyRunning``, ``RecoveryNeeded``, ``ProgrammingError``
(a component used against its contract) and ``SandboxError``.

Messages are lowercase, say what failed and the state it was in, and show
values with ``!r``; wrap lower-level errors with ``raise ... from``.
``PgshovelError`` itself is never raised: raise the class of the cause.
"""

from __future__ import annotations


class PgshovelError(Exception):
    """Root of every error pgshovel raises on purpose (abstract: raise a subclass)."""


# -- never retried ---------------------------------------------------------------


class ConfigurationError(PgshovelError):
    """A configuration file, value or installation is invalid; the message names it and the fix."""


class ComponentError(ConfigurationError):
    """A ``path: module:Name`` component could not be loaded, checked or configured."""


class NoSuchTransaction(ConfigurationError):
    """A transaction id the source never gave: out of a txid's range, or in its future."""


# -- data: follows on_error --------------------------------------------------------


class DataError(PgshovelError):
    """Data that cannot be handled as it is; follows ``on_error`` (never dropped)."""


class CodecError(DataError):
    """A value could not be converted between PostgreSQL text and the protocol."""


class StreamError(DataError):
    """The stream broke its protocol (gap, duplicate, stale epoch, bad order, lost offsets)."""


class SchemaError(DataError):
    """A table's shape changed in a way a consumer cannot follow exactly; names table and remedy."""


class StateError(DataError):
    """A consumer's stored state (position, table shapes, snapshot tasks) cannot be read as
    it is; names the field, and the target's reload as the remedy."""


class MessageTooLarge(DataError):
    """A message is larger than Kafka takes (the producer's or the broker's limit).

    ``topic``, ``key`` and ``value`` are the message's, for whoever can name its table.
    ``dropped``: the producer had already sent it (the broker refused it) and dropped what
    it still held, so what reached Kafka is uncertain (as after an outage) rather than
    everything before the message.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str = "",
        key: bytes | None = None,
        value: bytes | None = None,
        dropped: bool = False,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.key = key
        self.value = value
        self.dropped = dropped


# -- transient: retried with backoff ----------------------------------------------


class TransientError(PgshovelError):
    """Something outside is unavailable for now; the operation is retried with backoff."""


class DatabaseUnavailable(TransientError):
    """A database connection was lost or refused, or the server is restarting."""


class BrokerUnavailable(TransientError):
    """Kafka did not answer or did not acknowledge in time."""


class CoordinatorUnavailable(TransientError):
    """ZooKeeper could not be reached or the session was suspended."""


class LeadershipLost(TransientError):
    """This relay is no longer the set's leader; the batch in progress was abandoned."""


# -- everything else ends the command -------------------------------------------


class DatabaseError(PgshovelError):
    """A database statement failed for a lasting reason, or a database is not set up as required."""


class VersionConflict(PgshovelError):
    """Somebody else changed the configuration since it was read."""


class AlreadyRunning(PgshovelError):
    """Another process already holds what this one needs (a worker's lock on its target)."""


class NotRunning(PgshovelError):
    """A command needs a process that does not run (no worker of the set to answer it)."""


class RecoveryNeeded(PgshovelError):
    """A change stopped half way; the message says exactly what to run by hand."""


class ProgrammingError(PgshovelError):
    """A component was used against its contract (not opened, not bound)."""


class SandboxError(PgshovelError):
    """The local stack could not be started, reached or stopped."""
