"""relay.yml: which writer to publish with, how often to tick, what to do on errors.

```yaml
writer:
  path: pgshovel.relay.kafka:KafkaWriter
  configuration: {bootstrap_servers: "127.0.0.1:9092", properties: {...}}
tick_interval: 0.05        # seconds between pgq.ticker() calls (0 disables: pgqd ticks)
batch_max_events: 100000   # PgQ ticker_max_count: a tick is forced after this many events
poll_interval: 0.02        # seconds to sleep when no batch is ready
fetch_size: 5000           # events fetched per round trip inside a batch
on_error: exit             # exit | log
metrics_port: null         # serve Prometheus metrics on 127.0.0.1:<port> when set
metrics_host: 127.0.0.1
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgshovel.config_files import load_yaml
from pgshovel.errors import ConfigurationError

ON_ERROR_CHOICES = ("exit", "log")


@dataclass(frozen=True)
class RelayConfiguration:
    """A validated relay.yml."""

    writer: Mapping[str, Any]
    tick_interval: float = 0.05
    batch_max_events: int = 100_000
    poll_interval: float = 0.02
    fetch_size: int = 5000
    on_error: str = "exit"
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    retry_interval: float = 2.0
    source: str = field(default="<memory>", compare=False)


_NUMBERS: dict[str, tuple[type, float]] = {
    "tick_interval": (float, 0.0),
    "batch_max_events": (int, 1),
    "poll_interval": (float, 0.0),
    "fetch_size": (int, 1),
    "retry_interval": (float, 0.0),
}


def parse(document: Any, source: str) -> RelayConfiguration:
    """Validate a loaded relay.yml document; errors name the file and the key."""
    if not isinstance(document, Mapping):
        raise ConfigurationError(f"{source}: expected a mapping at the top level")
    known = {f for f in RelayConfiguration.__dataclass_fields__ if f != "source"}
    unknown = sorted(set(document) - known)
    if unknown:
        raise ConfigurationError(
            f"{source}: unknown keys {unknown!r}; expected some of {sorted(known)!r}"
        )
    if "writer" not in document:
        raise ConfigurationError(
            f"{source}: missing 'writer' (e.g. path: pgshovel.relay.kafka:KafkaWriter)"
        )
    values: dict[str, Any] = {"writer": document["writer"], "source": source}
    for key, (kind, minimum) in _NUMBERS.items():
        if key in document:
            raw = document[key]
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                raise ConfigurationError(f"{source}: {key}: expected a number, got {raw!r}")
            if kind is int and not isinstance(raw, int):
                raise ConfigurationError(f"{source}: {key}: expected an integer, got {raw!r}")
            if raw < minimum:
                raise ConfigurationError(f"{source}: {key}: must be >= {minimum}, got {raw!r}")
            values[key] = kind(raw)
    if "on_error" in document:
        if document["on_error"] not in ON_ERROR_CHOICES:
            raise ConfigurationError(
                f"{source}: on_error: expected one of {list(ON_ERROR_CHOICES)!r}, "
                f"got {document['on_error']!r}"
            )
        values["on_error"] = document["on_error"]
    port = document.get("metrics_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or port < 0):
        raise ConfigurationError(f"{source}: metrics_port: expected a port number, got {port!r}")
    values["metrics_port"] = port
    if "metrics_host" in document:
        values["metrics_host"] = str(document["metrics_host"])
    return RelayConfiguration(**values)


def load(path: Path) -> RelayConfiguration:
    """Read and validate relay.yml (``${VAR}`` / ``${VAR:-default}`` are expanded)."""
    return parse(load_yaml(path), str(path))
