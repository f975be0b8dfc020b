"""The connection record: JSON round trip, environment variables, shell exports."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess

import pytest

from pgshovel.errors import SandboxError
from pgshovel.sandbox import SandboxConnection
from pgshovel.sandbox._connection import (
    KAFKA_09_PROPERTIES,
    kafka_property_variable,
    postgres_dsn,
    shell_exports,
)


def connection() -> SandboxConnection:
    return SandboxConnection(
        state_dir="/tmp/state dir",
        postgres_dsn=postgres_dsn(5433, "postgres"),
        source_dsn=postgres_dsn(5433, "pgshovel_source"),
        target_dsn=postgres_dsn(5433, "pgshovel_target"),
        zookeeper_hosts="127.0.0.1:2182",
        kafka_bootstrap_servers="127.0.0.1:9093",
        kafka_properties=dict(KAFKA_09_PROPERTIES),
        pids={"postgres": 10, "zookeeper": 11, "kafka": 12},
        ports={"postgres": 5433, "zookeeper": 2182, "kafka": 9093},
        postgres_data_dir="/tmp/state dir/postgres/data",
    )


def test_json_round_trip_keeps_every_field() -> None:
    original = connection()
    assert SandboxConnection.from_json(original.to_json()) == original


def test_kafka_config_is_bootstrap_servers_plus_the_broker_properties() -> None:
    assert connection().kafka_config() == {
        "bootstrap.servers": "127.0.0.1:9093",
        "api.version.request": "false",
        "broker.version.fallback": "0.9.0.1",
    }


def test_environment_names_every_service_and_kafka_property() -> None:
    assert connection().environment() == {
        "PGSHOVEL_ZOOKEEPER_HOSTS": "127.0.0.1:2182",
        "PGSHOVEL_POSTGRES_DSN": "host=127.0.0.1 port=5433 user=postgres dbname=postgres",
        "PGSHOVEL_SOURCE_DSN": "host=127.0.0.1 port=5433 user=postgres dbname=pgshovel_source",
        "PGSHOVEL_TARGET_DSN": "host=127.0.0.1 port=5433 user=postgres dbname=pgshovel_target",
        "PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9093",
        "PGSHOVEL_KAFKA_API_VERSION_REQUEST": "false",
        "PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK": "0.9.0.1",
    }


def test_a_spark_master_is_recorded_and_exported() -> None:
    with_spark = dataclasses.replace(connection(), spark_master="spark://127.0.0.1:7077")
    assert SandboxConnection.from_json(with_spark.to_json()) == with_spark
    assert with_spark.environment()["PGSHOVEL_SPARK_MASTER"] == "spark://127.0.0.1:7077"
    assert "PGSHOVEL_SPARK_MASTER" not in connection().environment()


def test_a_record_written_before_spark_master_existed_reads_as_none() -> None:
    document = json.loads(connection().to_json())
    del document["spark_master"]
    assert SandboxConnection.from_json(json.dumps(document)).spark_master == ""


def test_kafka_property_variable_names() -> None:
    assert kafka_property_variable("session.timeout.ms") == "PGSHOVEL_KAFKA_SESSION_TIMEOUT_MS"
    assert kafka_property_variable("x-y") == "PGSHOVEL_KAFKA_X_Y"


def test_shell_exports_survive_a_real_shell() -> None:
    variables = {"B_DSN": "host=h port=1 dbname=it's", "A": '$(touch /nope) `x` "q"'}
    text = shell_exports(variables)
    assert text.splitlines()[0].startswith("export A=")
    script = text + 'printf "%s\\n%s\\n" "$A" "$B_DSN"'
    shown = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    assert shown.stdout == f"{variables['A']}\n{variables['B_DSN']}\n"
    assert shlex.split(text.splitlines()[1]) == ["export", "B_DSN=host=h port=1 dbname=it's"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not JSON"),
        ("[]", "expected a JSON object"),
        ('{"state_dir": 3}', "'state_dir' must be a string"),
    ],
)
def test_damaged_record_is_a_sandbox_error(text: str, problem: str) -> None:
    with pytest.raises(SandboxError, match=problem):
        SandboxConnection.from_json(text, "x/sandbox.json")


def test_pids_must_be_integers() -> None:
    data = connection().to_json().replace('"kafka": 12', '"kafka": "12"')
    with pytest.raises(SandboxError, match="'pids' must map names to int"):
        SandboxConnection.from_json(data)
