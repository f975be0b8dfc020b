"""replication.yml: the Spark settings and the loader, stream and target components.

```yaml
spark: {master: local[*], conf: {spark.ui.enabled: "false"}}
loader: {path: pgshovel.replication.loaders:PostgresSnapshotLoader, configuration: {...}}
stream: {path: pgshovel.replication.streams:KafkaStream, configuration: {...}}
target: {path: pgshovel.replication.targets.postgresql:PostgresTarget, configuration: {...}}
```

Everything is validated when the file is read; an unknown key anywhere is a
``ConfigurationError`` naming the file and the key. Strings may use
``${VAR}`` and ``${VAR:-default}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgshovel.components import build
from pgshovel.config_files import load_yaml
from pgshovel.errors import ConfigurationError
from pgshovel.replication.abc import Loader, Stream, Target

DEFAULT_MASTER = "local[*]"
_TOP_KEYS = ("spark", "loader", "stream", "target")
_SPARK_KEYS = ("master", "conf", "app_name")


@dataclass(frozen=True)
class SparkSettings:
    master: str = DEFAULT_MASTER
    app_name: str = "pgshovel-replicate"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplicationConfiguration:
    spark: SparkSettings
    loader: Loader
    stream: Stream
    target: Target


def _spark_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_spark(section: Any, source: str) -> SparkSettings:
    if section is None:
        return SparkSettings()
    if not isinstance(section, Mapping):
        raise ConfigurationError(f"{source}: spark: expected a mapping, got {section!r}")
    unknown = sorted(set(section) - set(_SPARK_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{source}: spark: unknown key {unknown[0]!r}; expected one of {list(_SPARK_KEYS)!r}"
        )
    master = section.get("master") or DEFAULT_MASTER
    if not isinstance(master, str):
        raise ConfigurationError(f"{source}: spark.master: expected a string, got {master!r}")
    conf = section.get("conf") or {}
    if not isinstance(conf, Mapping):
        raise ConfigurationError(f"{source}: spark.conf: expected a mapping, got {conf!r}")
    app_name = section.get("app_name") or "pgshovel-replicate"
    return SparkSettings(
        master=master,
        app_name=str(app_name),
        conf={str(key): _spark_value(value) for key, value in conf.items()},
    )


def _component(document: Mapping[str, Any], key: str, source: str, expected: type[Any]) -> Any:
    if key not in document:
        raise ConfigurationError(
            f"{source}: missing section {key!r} (with 'path' and 'configuration')"
        )
    where = f"{source}: {key}"
    try:
        return build(document[key], where, expected)
    except ConfigurationError as error:
        if str(error).startswith(source):
            raise
        raise ConfigurationError(f"{where}.configuration: {error}") from error


def parse_configuration(document: Any, source: str) -> ReplicationConfiguration:
    """Validate a parsed replication.yml and build its components."""
    if not isinstance(document, Mapping):
        raise ConfigurationError(f"{source}: expected a mapping with sections {list(_TOP_KEYS)!r}")
    unknown = sorted(set(document) - set(_TOP_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{source}: unknown key {unknown[0]!r}; expected sections {list(_TOP_KEYS)!r}"
        )
    return ReplicationConfiguration(
        spark=parse_spark(document.get("spark"), source),
        loader=_component(document, "loader", source, Loader),
        stream=_component(document, "stream", source, Stream),
        target=_component(document, "target", source, Target),
    )


def load_configuration(path: Path | str) -> ReplicationConfiguration:
    """Read, expand and validate replication.yml."""
    return parse_configuration(load_yaml(path), str(path))
