"""The example relay.yml against a modern broker: no librdkafka deprecation warnings.

A real ``pgshovel-relay`` runs ``example/relay.yml`` as shipped, plus one
property, ``test.mock.num.brokers``, which makes librdkafka run a mock cluster
of the current protocol inside the relay (the sandbox's Kafka is 0.9). With the
broker-compatibility variables unset, their properties are empty and left out,
so the log holds no ``CONFWARN``. With them set, the same run warns: the test
would see the warnings if the rule broke.
"""

from __future__ import annotations

from pathlib import Path

import psycopg2
import pytest
import yaml

from pgshovel.sandbox import SandboxConnection
from tests.integration.relay._relay import RelayProcess, install, queue_drained, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE_RELAY = Path(__file__).resolve().parents[3] / "example" / "relay.yml"
LEGACY = {
    "PGSHOVEL_KAFKA_API_VERSION_REQUEST": "true",
    "PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK": "0.10.0",
}


def example_with_mock_cluster(directory: Path) -> Path:
    document = yaml.safe_load(EXAMPLE_RELAY.read_text(encoding="utf-8"))
    document["writer"]["configuration"]["properties"]["test.mock.num.brokers"] = "1"
    # librdkafka's mock cluster auto-creates every topic with 4 partitions, and the relay
    # refuses a set topic with more than one (see test_table_topics): publish the table
    # topics only, which may have any number of partitions.
    document["writer"]["configuration"]["set_topic"] = False
    document["writer"]["configuration"]["table_topics"] = {"snapshot": False, "create": False}
    path = directory / "relay.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.mark.parametrize("legacy", [False, True], ids=["example-defaults", "legacy-variables"])
def test_example_relay_config_warns_only_when_legacy_properties_are_set(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    legacy: bool,
) -> None:
    for name in LEGACY:
        monkeypatch.delenv(name, raising=False)
    if legacy:
        for name, value in LEGACY.items():
            monkeypatch.setenv(name, value)
    # The mock cluster replaces whatever bootstrap servers the example names.
    monkeypatch.setenv("PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE items (id integer PRIMARY KEY, value text)")
    connection.close()
    install(zookeeper, cluster_name, database, [{"name": "items"}])

    relay = RelayProcess(
        sandbox, cluster_name, example_with_mock_cluster(tmp_path), tmp_path / "relay.log"
    )
    try:
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute("INSERT INTO items SELECT n, 'v' || n FROM generate_series(1, 20) n")
        connection.close()
        # Drained: the mock brokers acknowledged the batch, so the producer really ran.
        wait_for(
            lambda: queue_drained(database, cluster_name),
            60,
            "the relay to publish to the mock cluster",
            relay.output,
        )
    finally:
        assert relay.stop() == 0, relay.output()
    log = relay.output()
    assert "Mock cluster enabled" in log, log
    warnings = [line for line in log.splitlines() if "CONFWARN" in line or "deprecated" in line]
    if legacy:
        assert any("api.version.request" in line for line in warnings), log
    else:
        assert warnings == [], "\n".join(warnings)
