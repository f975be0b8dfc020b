"""``cluster secure``: give a cluster's existing ZooKeeper nodes the ACL of this process.

Nodes keep the ACL they were created with; a cluster created without
credentials stays open after credentials are configured. This walks every node
under ``/<cluster>`` and sets the ACL the environment gives new nodes
(``pgshovel.cluster.security``): creator-only with ``PGSHOVEL_ZOOKEEPER_AUTH``,
or ``PGSHOVEL_ZOOKEEPER_ACL``. Children come before their parent, so the walk
never needs a permission the new ACL might take away half way. Processes
still running without the credentials lose access at once: stop relays and
workers first, and start them again with the credentials.
"""

from __future__ import annotations

from collections.abc import Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.security import ACL

from pgshovel.cluster import names, security
from pgshovel.cluster.zookeeper import authorized
from pgshovel.errors import ConfigurationError


def describe(acl: Sequence[ACL]) -> str:
    """An ACL in ZooKeeper's ``scheme:id:perms`` form, comma separated."""
    letters = (("c", 4), ("d", 8), ("r", 1), ("w", 2), ("a", 16))
    return ",".join(
        f"{entry.id.scheme}:{entry.id.id}:"
        + "".join(letter for letter, bit in letters if entry.perms & bit)
        for entry in acl
    )


def children_first(client: KazooClient, path: str) -> list[str]:
    """``path`` and every node below it, each after all of its descendants."""
    try:
        with authorized(client, path):
            children = sorted(client.get_children(path))
    except NoNodeError:  # an ephemeral lock node that just went away
        return []
    found: list[str] = []
    for child in children:
        found += children_first(client, f"{path}/{child}")
    return [*found, path]


def secure_cluster(client: KazooClient, cluster: str, *, dry_run: bool) -> list[str]:
    """Set the environment's ACL on every node of ``cluster``; the nodes, children first."""
    acl = security.from_environment().acl
    if not acl:
        raise ConfigurationError(
            f"no ACL to apply: set {security.AUTH_VARIABLE} (or {security.AUTH_FILE_VARIABLE}) "
            f"for creator-only nodes, or {security.ACL_VARIABLE}"
        )
    root = names.cluster_path(cluster)
    if client.exists(root) is None:
        raise ConfigurationError(
            f"cluster {cluster!r} is not initialized (no node {root!r}); nothing to secure"
        )
    nodes = children_first(client, root)
    if not dry_run:
        for path in nodes:
            try:
                with authorized(client, path):
                    client.set_acls(path, list(acl))
            except NoNodeError:
                continue
    return nodes
