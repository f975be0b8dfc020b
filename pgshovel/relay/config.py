"""relay.yml: which writer to publish with, how often to tick, what to do on errors.

```yaml
writer:
  path: pgshovel.relay.kafka:KafkaWriter
  configuration: {bootstrap_servers: "127.0.0.1:9092", properties: {...}}
tick_interval: 0.05        # seconds between pgq.ticker() calls (0 disables: pgqd ticks)
batch_max_events: 100000   # PgQ ticker_max_count: a tick is forced after this many events
poll_interval: 0.02        # seconds to sleep when no batch is ready
fetch_size: 5000           # events fetched per round trip inside a batch
on_error: exit             # exit | log: what a data error does (transient faults are retried)
retry_interval: 2.0        # seconds before a batch that failed on a data error is retried (log)
max_backoff: 30.0          # longest wait between retries of a transient fault
metrics_port: null         # serve Prometheus metrics on 127.0.0.1:<port> when set
metrics_host: 127.0.0.1
source_connection: ""      # libpq keywords added to the set's dsn (user=pgshovel_relay ...)
standbys: []               # failover-safe publishing: standbys (application_name) that must
                           # have replayed a batch before it is published
```

The Kafka writer may also publish one topic per table (see ``TableTopics`` and
``pgshovel.relay.table_topics``)::

    writer:
      path: pgshovel.relay.kafka:KafkaWriter
      configuration:
        bootstrap_servers: ...
        set_topic: true            # the protobuf stream the replication worker reads
        table_topics: {prefix: shop, format: json}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast

from pydantic import Field, SecretStr, model_validator

from pgshovel import settings
from pgshovel.abc import StreamWriter
from pgshovel.components import ComponentSpec
from pgshovel.policy import OnError
from pgshovel.source import SourceConnection


class TableTopics(settings.Settings):
    """The Kafka writer's ``table_topics:`` section: one keyed, compacted topic per table."""

    #: topic names are ``[prefix.][schema.]table`` (schema left out for ``public``);
    #: unset: the set's topic name (``<cluster>.<set>``); "": no prefix
    prefix: str | None = None
    #: ``json``: the row as typed JSON, a tombstone for a delete; ``debezium``: Debezium's envelope
    format: Literal["json", "debezium"] = "json"
    #: Debezium's ``source.db`` (the source database's name)
    database: str = ""
    #: a new table topic starts with the table's rows (``op: r``), read in chunks between
    #: watermarks while the stream goes on (``pgshovel.relay.chunked_snapshots``)
    snapshot: bool = True
    #: rows per snapshot chunk (about: the chunk ends at the key this many rows on)
    snapshot_chunk_rows: int = Field(10_000, ge=1)
    #: ``format: debezium`` only: also publish Debezium's transaction-metadata topic
    #: ``<prefix>.transaction`` (BEGIN/END records with per-table event counts)
    transaction_topic: bool = False

    @model_validator(mode="after")
    def _transaction_topic_needs_debezium(self) -> TableTopics:
        if self.transaction_topic and self.format != "debezium":
            raise ValueError("transaction_topic needs format: debezium")
        return self

    #: create missing topics compacted through the admin API (Kafka 0.10.1 or later)
    create: bool = True
    #: partitions and replication factor of the topics the relay creates
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(1, ge=1)


class WriterSpec(ComponentSpec):
    """The ``writer:`` section: a ``StreamWriter``."""

    contract = StreamWriter

    def build(self) -> StreamWriter:
        return cast(StreamWriter, super().build())


class RelayConfiguration(settings.Settings):
    """A validated relay.yml."""

    writer: WriterSpec
    tick_interval: float = Field(0.05, ge=0)
    batch_max_events: int = Field(100_000, ge=1)
    poll_interval: float = Field(0.02, ge=0)
    fetch_size: int = Field(5000, ge=1)
    on_error: OnError = "exit"
    retry_interval: float = Field(2.0, ge=0)
    max_backoff: float = Field(30.0, gt=0)
    metrics_port: settings.Port = None
    metrics_host: str = "127.0.0.1"
    #: libpq keywords that replace or extend the set's dsn for this relay (its own role)
    source_connection: SourceConnection = SecretStr("")
    #: failover-safe publishing: application_names of physical standbys that must have
    #: replayed a batch before it is published (pgshovel.relay.failover)
    standbys: tuple[settings.NonEmptyText, ...] = ()


def parse_configuration(document: Any, source: str) -> RelayConfiguration:
    """Validate a loaded relay.yml document; errors name the file and the key."""
    return settings.validate(RelayConfiguration, document, source)


def load_configuration(path: Path | str) -> RelayConfiguration:
    """Read and validate relay.yml (``${VAR}`` / ``${VAR:-default}`` are expanded)."""
    return settings.load(RelayConfiguration, path)
