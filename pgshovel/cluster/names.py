"""Names derived from a cluster and a set: ZooKeeper paths, schema, trigger, queue, topics.

Cluster and set names become PostgreSQL identifiers, PgQ queue names and
ZooKeeper path segments, so they are restricted to a safe character set and to
lengths that keep every derived identifier within PostgreSQL's 63 bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pgshovel.errors import ConfigurationError

_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]+")

CLUSTER_NAME_MAX = 20
SET_NAME_MAX = 24
TRUNCATE_SUFFIX = "_truncate"


def _validate(kind: str, name: str, maximum: int) -> str:
    if not _SAFE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"invalid {kind} name {name!r}: use only letters, digits, '_' and '-'"
        )
    if len(name) > maximum:
        raise ConfigurationError(
            f"invalid {kind} name {name!r}: {len(name)} characters, at most {maximum} allowed"
        )
    return name


def validate_cluster_name(name: str) -> str:
    """Return ``name`` if it is a valid cluster name, else raise ``ConfigurationError``."""
    return _validate("cluster", name, CLUSTER_NAME_MAX)


def validate_set_name(name: str) -> str:
    """Return ``name`` if it is a valid replication set name, else raise ``ConfigurationError``."""
    return _validate("set", name, SET_NAME_MAX)


def cluster_path(cluster: str) -> str:
    """The ZooKeeper node holding the ClusterConfiguration."""
    return f"/{validate_cluster_name(cluster)}"


def sets_path(cluster: str) -> str:
    """The ZooKeeper node whose children are the replication sets."""
    return f"{cluster_path(cluster)}/sets"


def set_path(cluster: str, set_name: str) -> str:
    """The ZooKeeper node holding one ReplicationSetConfiguration."""
    return f"{sets_path(cluster)}/{validate_set_name(set_name)}"


def relay_path(cluster: str, set_name: str) -> str:
    """The relay's leader-election node for a set (created by the relay, not by admin)."""
    return f"{set_path(cluster, set_name)}/relay"


def requests_path(cluster: str, set_name: str) -> str:
    """The node whose children are requests to the set's worker (re-snapshot, verify)."""
    return f"{set_path(cluster, set_name)}/requests"


def results_path(cluster: str, set_name: str) -> str:
    """The node whose children are the worker's answers, named as the requests."""
    return f"{set_path(cluster, set_name)}/results"


def workers_path(cluster: str, set_name: str) -> str:
    """The node whose ephemeral children are the running workers' status (set inspect)."""
    return f"{set_path(cluster, set_name)}/workers"


def relays_path(cluster: str, set_name: str) -> str:
    """The node whose ephemeral children are the running relays' status (the console)."""
    return f"{set_path(cluster, set_name)}/relays"


def schema_name(cluster: str) -> str:
    """The database schema that holds a cluster's capture function and node id."""
    return f"pgshovel_{validate_cluster_name(cluster)}"


def trigger_name(cluster: str, set_name: str) -> str:
    """The row trigger a set installs on each of its tables."""
    return trigger_prefix(cluster) + validate_set_name(set_name)


def truncate_trigger_name(cluster: str, set_name: str) -> str:
    """The statement trigger a set installs on each of its tables to capture TRUNCATE."""
    return trigger_name(cluster, set_name) + TRUNCATE_SUFFIX


def trigger_prefix(cluster: str) -> str:
    """What every row and TRUNCATE trigger of the cluster's sets is named with first."""
    return f"pgshovel_{validate_cluster_name(cluster)}_"


def ddl_trigger_name(cluster: str) -> str:
    """The event trigger that records changes of captured tables' shapes (ddl_command_end)."""
    return f"pgshovel_{validate_cluster_name(cluster)}_ddl"


def drop_trigger_name(cluster: str) -> str:
    """The event trigger that records captured tables being dropped (sql_drop)."""
    return f"pgshovel_{validate_cluster_name(cluster)}_drop"


def rewrite_trigger_name(cluster: str) -> str:
    """The event trigger that notes which tables a command rewrote, and why (table_rewrite)."""
    return f"pgshovel_{validate_cluster_name(cluster)}_rewrite"


def rewrites_setting(cluster: str) -> str:
    """The transaction-local setting where the rewrite event trigger leaves what it saw.

    A setting's name is case-insensitive and allows no '-': the cluster name goes in as hex.
    """
    return "pgshovel.rewrites_" + validate_cluster_name(cluster).encode().hex()


def queue_prefix(cluster: str) -> str:
    """What every queue of the cluster's sets is named with first."""
    return f"pgshovel.{validate_cluster_name(cluster)}."


def queue_name(cluster: str, set_name: str) -> str:
    """The PgQ queue a set's triggers write into."""
    return queue_prefix(cluster) + validate_set_name(set_name)


def topic_name(cluster: str, set_name: str) -> str:
    """The Kafka topic a set's stream is published to unless the configuration names another."""
    return f"{validate_cluster_name(cluster)}.{validate_set_name(set_name)}"


def table_topic_suffix(schema: str, table: str) -> str:
    """A table's topic name after the prefix: ``[schema.]table``, the schema left out for
    ``public`` (the table topic is ``[prefix.]`` followed by this)."""
    return table if schema in ("public", "") else f"{schema}.{table}"


def colliding_tables(
    tables: Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], tuple[str, str], str] | None:
    """The first two ``(schema, table)`` whose table topics share a name whatever the prefix,
    with that name's suffix (``a``.``b`` and ``public``.``a.b`` are both ``a.b``); None."""
    owners: dict[str, tuple[str, str]] = {}
    for schema, table in tables:
        suffix = table_topic_suffix(schema, table)
        owner = owners.setdefault(suffix, (schema, table))
        if owner != (schema, table):
            return owner, (schema, table), suffix
    return None


#: The PgQ consumer the relay reads a set's queue as; registered when the set is
#: created, so no event is lost before the first relay starts.
CONSUMER = "pgshovel"


def prepared_transaction_prefix(cluster: str) -> str:
    """The prefix of every two-phase transaction id pgshovel-admin prepares."""
    return f"pgshovel_{validate_cluster_name(cluster)}_"
