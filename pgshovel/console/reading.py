"""What the console shows, read where each fact lives; plain JSON-ready dicts, for pages and API.

Clusters are the root nodes of ZooKeeper that hold a cluster configuration
and a ``sets`` node; a set's configuration comes from its node; the relay's
election (leader, standbys, epoch) from its lock node, as ``set inspect``
reads it; relays and workers describe themselves in their status nodes
(``pgshovel.relay.status``, ``pgshovel.replication.status``), numbers the
console shows as written, never recomputes. The queue's backlog is read from
the set's database as ``set inspect`` reads it; an unreachable database is
reported in the page, not raised. Only reads: nothing here writes anywhere.
"""

from __future__ import annotations

import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.status import read_statuses
from pgshovel.cluster.versions import set_version
from pgshovel.cluster.zookeeper import ClusterStore, access_denied
from pgshovel.errors import ConfigurationError, PgshovelError
from pgshovel.inspection import activity, catalog
from pgshovel.protocol import configuration_pb2
from pgshovel.source import connect

APPLICATION_NAME = "pgshovel-admin serve"
#: seconds to wait for a set's database when reading its backlog
DATABASE_TIMEOUT_SECONDS = 5


def cluster_names(client: KazooClient) -> list[str]:
    """The root nodes that are pgshovel clusters (a valid name with a ``sets`` node), sorted."""
    found = []
    for name in sorted(client.get_children("/")):
        try:
            path = names.sets_path(name)
        except ConfigurationError:
            continue  # not a name a cluster can have
        try:
            if client.exists(path) is not None:
                found.append(name)
        except NoAuthError:
            found.append(name)  # shown, with the access error, rather than hidden
    return found


def overview(client: KazooClient) -> dict[str, Any]:
    """Every cluster with its sets in one line each."""
    return {
        "now": time.time(),
        "clusters": [cluster(client, name) for name in cluster_names(client)],
    }


def cluster(client: KazooClient, name: str) -> dict[str, Any]:
    """A cluster's version and a summary of each of its sets."""
    store = ClusterStore(client, name)
    try:
        version = store.read_cluster().value.version
        sets = [set_summary(client, name, set_name) for set_name in store.set_names()]
    except (ConfigurationError, NoAuthError) as error:
        return {"name": name, "version": None, "error": _message(client, error, name), "sets": []}
    return {"name": name, "version": version, "error": None, "sets": sets}


def set_summary(client: KazooClient, cluster_name: str, set_name: str) -> dict[str, Any]:
    """One line of a cluster's table of sets."""
    configuration = ClusterStore(client, cluster_name).read_set(set_name).value
    relay = relay_view(client, cluster_name, set_name)
    leader = next((item for item in relay["processes"] if item.get("role") == "leader"), None)
    return {
        "name": set_name,
        "version": set_version(configuration),
        "tables": len(configuration.tables),
        "database": mask_dsn(configuration.database.dsn),
        "relay": {
            "leader": relay["leader"],
            "standbys": len(relay["standbys"]),
            "epoch": relay["epoch"],
            "lag_seconds": None if leader is None else leader.get("lag_seconds"),
        },
        "copies": [
            {
                "name": item["name"],
                "target": item.get("target"),
                "phase": item.get("phase"),
                "lag_seconds": item.get("lag_seconds"),
            }
            for item in copies(client, cluster_name, set_name)
        ],
    }


def set_detail(client: KazooClient, cluster_name: str, set_name: str) -> dict[str, Any]:
    """Everything the set's page shows: tables, relay, backlog, copies, last errors."""
    configuration = ClusterStore(client, cluster_name).read_set(set_name).value
    relay = relay_view(client, cluster_name, set_name)
    workers = copies(client, cluster_name, set_name)
    errors = [
        {"time": entry.get("time"), "process": process, "message": entry.get("message")}
        for process, document in [
            *((f"relay {item['name']}", item) for item in relay["processes"]),
            *((f"copy {item['name']}", item) for item in workers),
        ]
        for entry in document.get("recent_errors", ())
        if isinstance(entry, dict)
    ]
    errors.sort(key=lambda entry: float(entry["time"] or 0), reverse=True)
    return {
        "now": time.time(),
        "cluster": cluster_name,
        "set": set_name,
        "version": set_version(configuration),
        "database": mask_dsn(configuration.database.dsn),
        "tables": [_table(table) for table in configuration.tables],
        "relay": relay,
        "backlog": backlog(configuration, cluster_name, set_name),
        "copies": workers,
        "errors": errors,
    }


def relay_view(client: KazooClient, cluster_name: str, set_name: str) -> dict[str, Any]:
    """The election (leader first, standbys, epoch) and every running relay's status."""
    election = activity.read_relay(client, cluster_name, set_name)
    processes = [
        {"name": name, **document}
        for name, document in read_statuses(client, names.relays_path(cluster_name, set_name))
    ]
    return {
        "leader": election.contenders[0] if election.contenders else None,
        "standbys": list(election.contenders[1:]),
        "epoch": election.epoch,
        "last_leader": election.last_leader or None,
        "processes": processes,
    }


def copies(client: KazooClient, cluster_name: str, set_name: str) -> list[dict[str, Any]]:
    """Every running worker's status (one per copy of the set)."""
    return [
        {"name": name, **document}
        for name, document in read_statuses(client, names.workers_path(cluster_name, set_name))
    ]


def backlog(
    configuration: configuration_pb2.ReplicationSetConfiguration, cluster_name: str, set_name: str
) -> dict[str, Any]:
    """The set's queue as ``set inspect`` reads it; ``{"error": ...}`` when it cannot be read."""
    queue = names.queue_name(cluster_name, set_name)
    try:
        conn = connect(
            configuration.database.dsn,
            APPLICATION_NAME,
            autocommit=True,
            connect_timeout=DATABASE_TIMEOUT_SECONDS,
        )
    except PgshovelError as error:
        return {"error": f"database unreachable: {error}"}
    try:
        if not catalog.queue_exists(conn, queue):
            return {"error": f"queue {queue!r} is missing"}
        state = activity.read_queue(conn, queue)
    except PgshovelError as error:
        return {"error": str(error)}
    finally:
        conn.close()
    if state is None:
        return {"error": f"queue {queue!r} has no consumer {names.CONSUMER!r}"}
    return {
        "events": state.pending_events + state.untick_events,
        "oldest_seconds": state.consumer_lag,
        "last_batch_seconds": state.last_seen,
    }


def _table(table: configuration_pb2.TableConfiguration) -> dict[str, Any]:
    return {
        "name": f"{table.schema or 'public'}.{table.name}",
        "key_columns": list(table.key_columns),
        "columns": list(table.columns),
    }


def _message(client: KazooClient, error: Exception, cluster_name: str) -> str:
    if isinstance(error, NoAuthError):
        return str(access_denied(client, names.cluster_path(cluster_name)))
    return str(error)
