"""The sandbox's connection record: what ``up`` writes to ``sandbox.json`` and tools read back.

Pure data and conversions only (JSON, DSNs, ``PGSHOVEL_*`` environment variables,
shell exports); nothing here touches a process or a socket.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pgshovel.errors import SandboxError

# Client properties a Kafka 0.9 broker needs from librdkafka 2.x: it cannot answer
# ApiVersionRequest, so the client must be told which protocol version to speak.
KAFKA_09_PROPERTIES: dict[str, str] = {
    "api.version.request": "false",
    "broker.version.fallback": "0.9.0.1",
}

SOURCE_DATABASE = "pgshovel_source"
TARGET_DATABASE = "pgshovel_target"
SUPERUSER = "postgres"


@dataclass(frozen=True)
class SandboxConnection:
    """Where a running sandbox's services answer, and the processes that serve them."""

    state_dir: str
    postgres_dsn: str
    source_dsn: str
    target_dsn: str
    zookeeper_hosts: str
    kafka_bootstrap_servers: str
    kafka_properties: dict[str, str]
    pids: dict[str, int]
    ports: dict[str, int] = field(default_factory=dict)
    postgres_data_dir: str = ""
    #: the Spark standalone master beside the sandbox (``pgshovel-sandbox spark up``), or ""
    spark_master: str = ""

    def kafka_config(self) -> dict[str, str]:
        """confluent-kafka configuration: ``bootstrap.servers`` plus the broker's properties."""
        return {"bootstrap.servers": self.kafka_bootstrap_servers, **self.kafka_properties}

    def environment(self) -> dict[str, str]:
        """The ``PGSHOVEL_*`` variables the command lines and YAML configurations pick up."""
        variables = {
            "PGSHOVEL_ZOOKEEPER_HOSTS": self.zookeeper_hosts,
            "PGSHOVEL_POSTGRES_DSN": self.postgres_dsn,
            "PGSHOVEL_SOURCE_DSN": self.source_dsn,
            "PGSHOVEL_TARGET_DSN": self.target_dsn,
            "PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS": self.kafka_bootstrap_servers,
        }
        for name, value in self.kafka_properties.items():
            variables[kafka_property_variable(name)] = value
        if self.spark_master:
            variables["PGSHOVEL_SPARK_MASTER"] = self.spark_master
        return variables

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, origin: str = "sandbox.json") -> SandboxConnection:
        """Parse what :meth:`to_json` wrote; a damaged file is a :class:`SandboxError`."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise SandboxError(
                f"cannot read {origin!r}: not JSON ({error}); run 'pgshovel-sandbox up' again"
            ) from error
        if not isinstance(data, dict):
            raise SandboxError(f"cannot read {origin!r}: expected a JSON object")
        return cls(
            state_dir=_text(data, "state_dir", origin),
            postgres_dsn=_text(data, "postgres_dsn", origin),
            source_dsn=_text(data, "source_dsn", origin),
            target_dsn=_text(data, "target_dsn", origin),
            zookeeper_hosts=_text(data, "zookeeper_hosts", origin),
            kafka_bootstrap_servers=_text(data, "kafka_bootstrap_servers", origin),
            kafka_properties=_mapping(data, "kafka_properties", str, origin),
            pids=_mapping(data, "pids", int, origin),
            ports=_mapping(data, "ports", int, origin, required=False),
            postgres_data_dir=_text(data, "postgres_data_dir", origin, required=False),
            spark_master=_text(data, "spark_master", origin, required=False),
        )


def kafka_property_variable(name: str) -> str:
    """``broker.version.fallback`` -> ``PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK``."""
    return "PGSHOVEL_KAFKA_" + name.upper().replace(".", "_").replace("-", "_")


def shell_exports(variables: Mapping[str, str]) -> str:
    """``export NAME=value`` lines, sorted, values quoted for POSIX shells."""
    return "".join(f"export {name}={shlex.quote(variables[name])}\n" for name in sorted(variables))


def postgres_dsn(port: int, dbname: str) -> str:
    """A libpq key/value DSN for the sandbox server (trust authentication: no password)."""
    return f"host=127.0.0.1 port={port} user={SUPERUSER} dbname={dbname}"


def _text(data: Mapping[str, Any], key: str, origin: str, required: bool = True) -> str:
    value = data.get(key, None if required else "")
    if not isinstance(value, str):
        raise SandboxError(f"cannot read {origin!r}: {key!r} must be a string, got {value!r}")
    return value


def _mapping(
    data: Mapping[str, Any], key: str, kind: type, origin: str, required: bool = True
) -> dict[str, Any]:
    value = data.get(key, None if required else {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, kind) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        raise SandboxError(
            f"cannot read {origin!r}: {key!r} must map names to {kind.__name__}, got {value!r}"
        )
    return dict(value)
