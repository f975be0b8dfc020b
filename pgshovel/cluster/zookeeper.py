"""Reading the cluster's configuration from ZooKeeper, with the node versions read.

Every read returns the znode version next to the decoded protobuf, so a change
can later be committed with a multi-op that checks nothing moved in between.
Writing happens only in ``pgshovel.admin.twophase`` (one multi-op per change).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError, Message
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError, CoordinatorUnavailable
from pgshovel.protocol import configuration_pb2

CONNECT_TIMEOUT_SECONDS = 10.0

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class Versioned(Generic[M]):
    """A decoded znode and the version it had when read."""

    path: str
    value: M
    version: int


def start_client(hosts: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> KazooClient:
    """A started ZooKeeper client for ``hosts``; ``CoordinatorUnavailable`` when it cannot be."""
    client = KazooClient(hosts=hosts, timeout=timeout)
    try:
        client.start(timeout=timeout)
    except (KazooTimeoutError, KazooException) as error:
        client.close()
        raise CoordinatorUnavailable(
            f"cannot connect to zookeeper at {hosts!r} within {timeout:g}s: {error}; "
            "check --zookeeper-hosts / PGSHOVEL_ZOOKEEPER_HOSTS"
        ) from error
    return client


@contextmanager
def connect(hosts: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> Iterator[KazooClient]:
    """A started ZooKeeper client for ``hosts``, stopped and closed on exit."""
    client = start_client(hosts, timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _read(client: KazooClient, path: str, message: M) -> Versioned[M]:
    data, stat = client.get(path)
    try:
        message.ParseFromString(data)
    except DecodeError as error:
        raise ConfigurationError(
            f"zookeeper node {path!r} does not hold a {type(message).__name__}: {error}"
        ) from error
    return Versioned(path=path, value=message, version=stat.version)


class ClusterStore:
    """Read access to one cluster's nodes."""

    def __init__(self, client: KazooClient, cluster: str) -> None:
        self.client = client
        self.cluster = names.validate_cluster_name(cluster)

    def cluster_exists(self) -> bool:
        return self.client.exists(names.cluster_path(self.cluster)) is not None

    def read_cluster(self) -> Versioned[configuration_pb2.ClusterConfiguration]:
        """The cluster node; an error telling to initialize when it is missing."""
        path = names.cluster_path(self.cluster)
        try:
            return _read(self.client, path, configuration_pb2.ClusterConfiguration())
        except NoNodeError as error:
            raise ConfigurationError(
                f"cluster {self.cluster!r} is not initialized (no node {path!r}); "
                "run 'pgshovel-admin cluster initialize' first"
            ) from error

    def set_names(self) -> list[str]:
        """The replication sets of the cluster, sorted."""
        try:
            return sorted(self.client.get_children(names.sets_path(self.cluster)))
        except NoNodeError as error:
            raise ConfigurationError(
                f"cluster {self.cluster!r} is not initialized; "
                "run 'pgshovel-admin cluster initialize' first"
            ) from error

    def set_exists(self, set_name: str) -> bool:
        return self.client.exists(names.set_path(self.cluster, set_name)) is not None

    def read_set(self, set_name: str) -> Versioned[configuration_pb2.ReplicationSetConfiguration]:
        """A set's node; an error naming the set when it does not exist."""
        path = names.set_path(self.cluster, set_name)
        try:
            return _read(self.client, path, configuration_pb2.ReplicationSetConfiguration())
        except NoNodeError as error:
            raise ConfigurationError(
                f"set {set_name!r} does not exist in cluster {self.cluster!r}; "
                "see 'pgshovel-admin set list'"
            ) from error

    def relay_children(self, set_name: str) -> list[str] | None:
        """The relay election node's children, or None when the node does not exist."""
        return self.children(names.relay_path(self.cluster, set_name))

    def children(self, path: str) -> list[str] | None:
        """A node's children, or None when the node does not exist."""
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return None
