"""One set's configuration as ZooKeeper holds it now: a versioned value, one watch, events.

The relay and the replication worker see their set only through a
``SetWatch``: the set node's configuration with the node's version and the set
version (``set_version``, the hash stamped on every Begin), kept current by
one kazoo ``DataWatch``. ``current()`` may be called from any thread. Every
change is logged the same way in both processes (tables that joined or left,
keys, captured columns, provenance, the database) and sets ``changed``; a new
database (``set failover``) also sets ``moved``, and a deleted node (``set
drop``) sets ``dropped``. A process about to connect to the set's database
takes the value with ``follow()``, which clears ``moved`` in the same step, so
a move landing after that is never missed; anything that waits (the relay's
standby gate, a promotion wait) can be interrupted by ``moved``. ``refresh()``
reads the node at once (after a ``sync``) for a decision that must not wait for
the watch's notification: the worker's initial snapshot reads its set with it
right after exporting. Updates are ordered by the node's modification zxid, so
a late notification never overwrites a newer read. A watch made with
``fixed`` holds one configuration and never changes (no ZooKeeper).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import ZnodeStat

from pgshovel.cluster.dsn import mask_dsn, stored_password_warning
from pgshovel.cluster.versions import set_version
from pgshovel.cluster.zookeeper import ClusterStore, authorized, start_client
from pgshovel.errors import CoordinatorUnavailable
from pgshovel.protocol import configuration_pb2

logger = logging.getLogger(__name__)

SetConfiguration = configuration_pb2.ReplicationSetConfiguration
TableConfiguration = configuration_pb2.TableConfiguration

__all__ = ["SetWatch", "WatchedSet", "describe_changes"]


@dataclass(frozen=True)
class WatchedSet:
    """A set's configuration as read from its node (treat ``configuration`` as read-only)."""

    configuration: SetConfiguration
    #: the set version: a hash of the configuration (``pgshovel.cluster.versions``)
    version: str
    #: the znode's version (-1: not read from ZooKeeper)
    node_version: int = -1
    #: the znode's modification zxid: orders two reads of the node
    zxid: int = -1

    @classmethod
    def of(cls, configuration: SetConfiguration, stat: ZnodeStat | None = None) -> WatchedSet:
        if stat is None:
            return cls(configuration, set_version(configuration))
        return cls(configuration, set_version(configuration), stat.version, stat.mzxid)

    @property
    def dsn(self) -> str:
        return str(self.configuration.database.dsn)


def _label(table: TableConfiguration) -> str:
    return f"{table.schema or 'public'!r}.{table.name!r}"


def describe_changes(old: SetConfiguration, new: SetConfiguration) -> list[str]:
    """What changed from ``old`` to ``new``, one phrase per change (passwords masked)."""
    before = {(t.schema or "public", t.name): t for t in old.tables}
    after = {(t.schema or "public", t.name): t for t in new.tables}
    phrases = [
        f"table {_label(after[name])} joined the set" for name in after if name not in before
    ]
    phrases += [
        f"table {_label(before[name])} left the set" for name in before if name not in after
    ]
    for name, table in after.items():
        previous = before.get(name)
        if previous is None:
            continue
        label = _label(table)
        if list(previous.key_columns) != list(table.key_columns):
            phrases.append(
                f"table {label}: key columns {list(previous.key_columns)!r} -> "
                f"{list(table.key_columns)!r}"
            )
        if list(previous.columns) != list(table.columns):
            phrases.append(
                f"table {label}: captured columns {list(previous.columns) or 'all'!r} -> "
                f"{list(table.columns) or 'all'!r}"
            )
        if previous.provenance != table.provenance:
            phrases.append(f"table {label}: provenance {'on' if table.provenance else 'off'}")
    if old.allow_unkeyed != new.allow_unkeyed:
        phrases.append(f"allow_unkeyed {str(new.allow_unkeyed).lower()}")
    if old.database.dsn != new.database.dsn:
        phrases.append(f"database {mask_dsn(old.database.dsn)!r} -> {mask_dsn(new.database.dsn)!r}")
    return phrases


class SetWatch:
    """A set's configuration, kept current from its ZooKeeper node (see the module)."""

    def __init__(self, set_name: str, value: WatchedSet) -> None:
        self.set_name = set_name
        self.changed = threading.Event()
        self.moved = threading.Event()
        self.dropped = threading.Event()
        self._value = value
        self._lock = threading.Lock()
        self._listeners: list[Callable[[WatchedSet, WatchedSet], None]] = []
        self._client: KazooClient | None = None
        self._owns_client = False
        self._path = ""
        self._closed = False

    # -- making one -----------------------------------------------------------------

    @classmethod
    def fixed(cls, set_name: str, configuration: SetConfiguration) -> SetWatch:
        """A configuration that never changes (no ZooKeeper: tests, a worker told its set)."""
        return cls(set_name, WatchedSet.of(configuration))

    @classmethod
    def start(cls, client: KazooClient, cluster: str, set_name: str) -> SetWatch:
        """Read the set now (a ``ConfigurationError`` naming it when it does not exist) and
        watch it with ``client``, which the caller keeps and stops."""
        try:
            read = ClusterStore(client, cluster).read_set(set_name)
        except KazooException as error:
            raise CoordinatorUnavailable(
                f"cannot read set {set_name!r} from zookeeper: {error}"
            ) from error
        first = WatchedSet(read.value, set_version(read.value), read.version, read.zxid)
        watch = cls(set_name, first)
        path = read.path
        if warning := stored_password_warning(set_name, first.dsn):
            logger.warning("%s", warning)
        watch._client, watch._path = client, path
        try:
            client.DataWatch(path, watch.update)
        except KazooException as error:
            raise CoordinatorUnavailable(
                f"cannot watch set {set_name!r} in zookeeper: {error}"
            ) from error
        return watch

    @classmethod
    def open(cls, hosts: str, cluster: str, set_name: str) -> SetWatch:
        """``start`` with a client of its own, stopped by ``close``."""
        client = start_client(hosts)
        try:
            watch = cls.start(client, cluster, set_name)
        except BaseException:
            client.stop()
            client.close()
            raise
        watch._owns_client = True
        return watch

    def close(self) -> None:
        """Stop watching (the next notification ends the DataWatch); stop an own client."""
        self._closed = True
        if self._owns_client and self._client is not None:
            self._client.stop()
            self._client.close()
        self._client = None

    # -- reading ----------------------------------------------------------------------

    def current(self) -> WatchedSet:
        """The set as last read."""
        with self._lock:
            return self._value

    def follow(self) -> WatchedSet:
        """The set to connect with now; clears ``moved`` (a later move sets it again)."""
        with self._lock:
            self.moved.clear()
            return self._value

    def refresh(self) -> WatchedSet:
        """Read the node now, ``current()`` after that; without ZooKeeper, ``current()``.

        ``CoordinatorUnavailable`` when ZooKeeper cannot answer; a dropped set keeps
        its last configuration (``dropped`` is set)."""
        client = self._client
        if client is None:
            return self.current()
        try:
            client.sync(self._path)
            with authorized(client, self._path):
                data, stat = client.get(self._path)
        except NoNodeError:
            self.update(None, None)
            return self.current()
        except KazooException as error:
            raise CoordinatorUnavailable(
                f"cannot read set {self.set_name!r} from zookeeper: {error}"
            ) from error
        self.update(data, stat)
        return self.current()

    @property
    def version(self) -> str:
        """The set version now (stamped on each Begin)."""
        return self.current().version

    @property
    def exists(self) -> bool:
        return not self.dropped.is_set()

    @property
    def watching(self) -> bool:
        """Whether ZooKeeper keeps this watch current (False: ``fixed``, or closed)."""
        return self._client is not None

    def on_change(self, listener: Callable[[WatchedSet, WatchedSet], None]) -> None:
        """Call ``listener(old, new)`` after every change (in the thread that saw it)."""
        self._listeners.append(listener)

    # -- following the node -----------------------------------------------------------

    def update(self, data: bytes | None, stat: ZnodeStat | None) -> bool:
        """Take the node's data (None: deleted); what the DataWatch calls. False once closed."""
        if self._closed:
            return False
        if data is None:
            if not self.dropped.is_set():
                logger.warning("set %r was dropped", self.set_name)
            self.dropped.set()
            return True
        try:
            configuration = SetConfiguration.FromString(data)
        except DecodeError as error:
            logger.error(
                "set %r: zookeeper node %r does not hold a set configuration (%s): "
                "keeping the last one read",
                self.set_name,
                self._path,
                error,
            )
            return True
        new = WatchedSet.of(configuration, stat)
        with self._lock:
            old = self._value
            if stat is not None and 0 <= stat.mzxid <= old.zxid:
                return True  # a read older than (or the same as) the one held
            self._value = new
            self.dropped.clear()
            differs = old.configuration != new.configuration
            if differs:
                self.changed.set()
            if old.dsn != new.dsn:
                self.moved.set()
        if differs:
            self._announce(old, new)
        return True

    def _announce(self, old: WatchedSet, new: WatchedSet) -> None:
        phrases = describe_changes(old.configuration, new.configuration)
        logger.info(
            "set %r changed: version %s -> %s (%s)",
            self.set_name,
            old.version,
            new.version,
            "; ".join(phrases) or "no visible difference",
        )
        if old.dsn != new.dsn:
            logger.warning(
                "set %r moved to database %r: leaving %r at the next safe point",
                self.set_name,
                mask_dsn(new.dsn),
                mask_dsn(old.dsn),
            )
            if warning := stored_password_warning(self.set_name, new.dsn):
                logger.warning("%s", warning)
        for listener in self._listeners:
            listener(old, new)
