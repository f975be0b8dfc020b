"""relay.yml: which writer to publish with, how often to tick, what to do on errors.

```yaml
writer:
  path: pgshovel.relay.kafka:KafkaWriter
  configuration: {bootstrap_servers: "127.0.0.1:9092", properties: {...}}
tick_interval: 0.05        # seconds between pgq.ticker() calls (0 disables: pgqd ticks)
batch_max_events: 100000   # PgQ ticker_max_count: a tick is forced after this many events
poll_interval: 0.02        # seconds to sleep when no batch is ready (less if a tick is due)
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
``pgshovel.relay.table_topics``); its outputs, the set topic and the table
topics, share one producer (``pgshovel.relay.kafka``)::

    writer:
      path: pgshovel.relay.kafka:KafkaWriter
      configuration:
        bootstrap_servers: ...
        set_topic: true            # the protobuf stream the replication worker reads
        table_topics: {prefix: shop, format: json}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from pydantic import Field, SecretStr

from pgshovel import settings
from pgshovel.abc import StreamWriter
from pgshovel.components import ComponentSpec
from pgshovel.policy import OnError
from pgshovel.relay.table_topics import TableTopics
from pgshovel.source import SourceConnection


class WriterSpec(ComponentSpec):
    """The ``writer:`` section: a ``StreamWriter``."""

    contract = StreamWriter

    def build(self) -> StreamWriter:
        return cast(StreamWriter, super().build())


__all__ = [
    "RelayConfiguration",
    "TableTopics",
    "WriterSpec",
    "load_configuration",
    "parse_configuration",
]


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
