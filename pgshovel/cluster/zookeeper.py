"""Reading the cluster's configuration from ZooKeeper, with the node versions read.

Every read returns the znode version next to the decoded protobuf, so a change
can later be committed with a multi-op that checks nothing moved in between.
Writing happens only in ``pgshovel.admin.twophase`` (one multi-op per change).
Every client starts here, with the credentials and the ACL of its process's
environment (``pgshovel.cluster.security``); a node whose ACL does not admit
the client is a ``ConfigurationError`` naming the node and the variable to set.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError, Message
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from pgshovel.cluster import names, security
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
    #: the node's modification zxid when read (orders two reads of one node)
    zxid: int = -1


def start_client(hosts: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> KazooClient:
    """A started ZooKeeper client for ``hosts``, authenticated as the environment says.

    ``CoordinatorUnavailable`` when ZooKeeper cannot be reached; a
    ``ConfigurationError`` when the environment's credentials are malformed or
    refused.
    """
    settings = security.from_environment()
    client = KazooClient(hosts=hosts, timeout=timeout, **settings.client_options())
    try:
        client.start(timeout=timeout)
    except AuthFailedError as error:
        client.close()
        raise ConfigurationError(
            f"zookeeper at {hosts!r} refused the credentials of {settings.identity}; "
            f"check {security.AUTH_VARIABLE} / {security.AUTH_FILE_VARIABLE}"
        ) from error
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


def access_denied(client: KazooClient, path: str) -> ConfigurationError:
    """The error for a node whose ACL does not admit ``client``."""
    who = security.identity(client.auth_data)
    return ConfigurationError(
        f"zookeeper refused access to {path!r} for {who}: its ACL admits other credentials; "
        f"set {security.AUTH_VARIABLE} (or {security.AUTH_FILE_VARIABLE}) to the "
        "credentials the cluster's nodes were created with"
    )


@contextmanager
def authorized(client: KazooClient, path: str) -> Iterator[None]:
    """Turn kazoo's ``NoAuthError`` inside the block into ``access_denied``."""
    try:
        yield
    except NoAuthError as error:
        raise access_denied(client, path) from error


def _read(client: KazooClient, path: str, message: M) -> Versioned[M]:
    with authorized(client, path):
        data, stat = client.get(path)
    try:
        message.ParseFromString(data)
    except DecodeError as error:
        raise ConfigurationError(
            f"zookeeper node {path!r} does not hold a {type(message).__name__}: {error}"
        ) from error
    return Versioned(path=path, value=message, version=stat.version, zxid=stat.mzxid)


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
        path = names.sets_path(self.cluster)
        try:
            with authorized(self.client, path):
                return sorted(self.client.get_children(path))
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
            with authorized(self.client, path):
                return sorted(self.client.get_children(path))
        except NoNodeError:
            return None
