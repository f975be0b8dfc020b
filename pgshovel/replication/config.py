"""replication.yml: the Spark settings and the loader, stream and target components.

```yaml
spark: {master: local[*], conf: {spark.ui.enabled: "false"}}
loader: {path: pgshovel.replication.loaders:PostgresSnapshotLoader, configuration: {...}}
stream: {path: pgshovel.replication.streams:KafkaStream, configuration: {...}}
target: {path: pgshovel.replication.targets.postgresql:PostgresTarget, configuration: {...}}
# or a built-in target by name, its configuration beside: {type: delta, path: /data/copy},
# {type: iceberg, warehouse: /data/warehouse, catalog_uri: sqlite:///...}
snapshots: {rows_per_chunk: 20000, parallel: 2}
metrics_port: null         # serve Prometheus metrics on metrics_host:<port> when set
metrics_host: 127.0.0.1
source_connection: "user=pgshovel_worker"   # optional: libpq keywords added to the set's dsn
on_error: exit             # exit | log: what a data error does (transient faults are retried)
retry_interval: 2.0        # seconds before a micro-batch that failed on a data error is retried
stage_min_mutations: 20000 # smaller micro-batches are applied by the driver, larger ones staged
stage_task_rows: 100000    # about how many row changes one staging task reads
max_backoff: 30.0          # longest wait between retries of a transient fault
```

Everything is validated when the file is read (``pgshovel.settings``,
``pgshovel.components``): an unknown key anywhere, a value of the wrong type
or a component that does not satisfy its contract is a ``ConfigurationError``
naming the file and the key, before any component is constructed. Strings may
use ``${VAR}`` and ``${VAR:-default}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from pgshovel import settings
from pgshovel.abc import TARGET_CAPABILITIES, Loader, Stream, Target
from pgshovel.components import ComponentSpec, load_class, validate_arguments
from pgshovel.policy import OnError
from pgshovel.settings import SUBPATH
from pgshovel.source import SourceConnection

DEFAULT_MASTER = "local[*]"


def _spark_values(conf: Any) -> Any:
    """Spark wants strings; YAML booleans become ``true``/``false``, numbers their text."""
    if not isinstance(conf, dict):
        return conf
    return {
        str(key): str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in conf.items()
    }


class SparkSettings(settings.Settings):
    """The ``spark:`` section."""

    master: str = Field(DEFAULT_MASTER, min_length=1)
    app_name: str = "pgshovel-replicate"
    conf: Annotated[dict[str, str], BeforeValidator(_spark_values)] = {}


class SnapshotSettings(settings.Settings):
    """The ``snapshots:`` section: incremental snapshots (backfill, re-snapshot, verify)."""

    rows_per_chunk: int = Field(20_000, ge=1)
    parallel: int = Field(2, ge=1)


class LoaderSpec(ComponentSpec):
    contract = Loader


class StreamSpec(ComponentSpec):
    contract = Stream


#: ``target: {type: NAME, ...}``: the built-in targets by name, the other keys their
#: configuration (``target: {type: delta, path: /data/copy}``).
TARGET_TYPES = {
    "delta": "pgshovel.replication.targets.delta:DeltaTarget",
    "iceberg": "pgshovel.replication.targets.iceberg:IcebergTarget",
    "parquet": "pgshovel.replication.targets.parquet:ParquetTarget",
    "postgresql": "pgshovel.replication.targets.postgresql:PostgresTarget",
}


class TargetSpec(ComponentSpec):
    contract = Target
    capabilities = TARGET_CAPABILITIES

    @model_validator(mode="before")
    @classmethod
    def _by_type(cls, value: Any) -> Any:
        """``{type: delta, path: ...}`` as ``{path: <the class>, configuration: {path: ...}}``."""
        if not isinstance(value, dict) or "type" not in value:
            return value
        kind = value["type"]
        if kind not in TARGET_TYPES:
            raise PydanticCustomError(
                "pgshovel_component",
                "{message}",
                {
                    "message": f"unknown target type {kind!r}; expected one of "
                    f"{sorted(TARGET_TYPES)!r}",
                    SUBPATH: "type",
                },
            )
        configuration = {key: item for key, item in value.items() if key != "type"}
        try:  # errors name the keys as written: target.warehouse, not target.configuration...
            validate_arguments(load_class(TARGET_TYPES[kind]), configuration)
        except ValidationError as error:
            found: list[InitErrorDetails] = []
            for detail in error.errors():
                message = str((detail.get("ctx") or {}).get("message", detail["msg"]))
                found.append(
                    InitErrorDetails(
                        type=PydanticCustomError(
                            "pgshovel_component", "{message}", {"message": message}
                        ),
                        loc=tuple(detail["loc"][1:]),
                        input=detail.get("input"),
                    )
                )
            raise ValidationError.from_exception_data(error.title, found) from error
        return {"path": TARGET_TYPES[kind], "configuration": configuration}


class ReplicationSettings(settings.Settings):
    """replication.yml as validated; ``build`` constructs its components."""

    spark: SparkSettings = SparkSettings()
    snapshots: SnapshotSettings = field(default_factory=SnapshotSettings)
    loader: LoaderSpec
    stream: StreamSpec
    target: TargetSpec
    metrics_port: settings.Port = None
    metrics_host: str = "127.0.0.1"
    #: libpq keywords that replace or extend the set's dsn for this worker (its own role)
    source_connection: SourceConnection = SecretStr("")
    #: what a data error does (``pgshovel.policy``): ``exit`` ends the worker, ``log`` logs it
    #: and starts over from the target's stored state after ``retry_interval``
    on_error: OnError = "exit"
    retry_interval: float = Field(2.0, ge=0)
    max_backoff: float = Field(30.0, gt=0)
    #: a micro-batch of at least this many row changes is staged by Spark tasks and committed
    #: once (docs/scale-out.md); smaller ones, and those the staged path cannot take, are
    #: applied by the driver
    stage_min_mutations: int = Field(20_000, ge=1)
    #: about how many row changes one staging task reads: a partition's messages of a
    #: micro-batch are cut into tasks at the first batch boundary past this many
    stage_task_rows: int = Field(100_000, ge=1)

    def build(self) -> ReplicationConfiguration:
        return ReplicationConfiguration(
            spark=self.spark,
            snapshots=self.snapshots,
            metrics_port=self.metrics_port,
            metrics_host=self.metrics_host,
            loader=cast(Loader, self.loader.build()),
            stream=cast(Stream, self.stream.build()),
            target=cast(Target, self.target.build()),
            source_connection=self.source_connection.get_secret_value(),
            on_error=self.on_error,
            retry_interval=self.retry_interval,
            max_backoff=self.max_backoff,
            stage_min_mutations=self.stage_min_mutations,
            stage_task_rows=self.stage_task_rows,
        )


@dataclass(frozen=True)
class ReplicationConfiguration:
    """The worker's Spark settings and its constructed components."""

    spark: SparkSettings
    loader: Loader
    stream: Stream
    target: Target
    snapshots: SnapshotSettings = field(default_factory=SnapshotSettings)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    source_connection: str = field(default="", repr=False)
    on_error: OnError = "exit"
    retry_interval: float = 2.0
    max_backoff: float = 30.0
    stage_min_mutations: int = 20_000
    stage_task_rows: int = 100_000


def parse_configuration(document: Any, source: str) -> ReplicationConfiguration:
    """Validate a parsed replication.yml and build its components."""
    return settings.validate(ReplicationSettings, document, source).build()


def load_configuration(path: Path | str) -> ReplicationConfiguration:
    """Read, expand and validate replication.yml, and build its components."""
    return settings.load(ReplicationSettings, path).build()
