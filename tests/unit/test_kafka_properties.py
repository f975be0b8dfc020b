"""Empty Kafka properties are left out everywhere pgshovel hands properties to librdkafka."""

from __future__ import annotations

from pgshovel._kafka_properties import client_properties
from pgshovel.config_files import parse_yaml
from pgshovel.relay.producer import producer_settings
from pgshovel.stream.reader import consumer_settings

BROKER_09 = {"api.version.request": "false", "broker.version.fallback": "0.9.0.1"}
# As the example configurations write them.
DOCUMENT = """
properties:
  api.version.request: ${PGSHOVEL_KAFKA_API_VERSION_REQUEST:-}
  broker.version.fallback: ${PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK:-}
  client.id:
  linger.ms: 7
  enable.ssl.certificate.verification: false
"""


def properties(environ: dict[str, str]) -> dict[str, object]:
    document = parse_yaml(DOCUMENT, "test.yml", environ)
    assert isinstance(document, dict)
    return dict(document["properties"])


def test_unset_variables_and_nulls_leave_the_property_out() -> None:
    assert client_properties(properties({})) == {
        "linger.ms": "7",
        "enable.ssl.certificate.verification": "false",
    }


def test_set_variables_pass_through() -> None:
    environ = {
        "PGSHOVEL_KAFKA_API_VERSION_REQUEST": "false",
        "PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK": "0.9.0.1",
    }
    assert client_properties(properties(environ)).items() >= BROKER_09.items()


def test_blank_text_counts_as_empty() -> None:
    assert client_properties({"client.id": "  ", "acks": "all"}) == {"acks": "all"}


def test_producer_leaves_out_empty_properties_and_stays_idempotent() -> None:
    settings = producer_settings("b:9092", properties({}))
    assert "api.version.request" not in settings and "broker.version.fallback" not in settings
    assert "client.id" not in settings
    assert settings["enable.idempotence"] == "true"


def test_producer_for_the_sandbox_broker_keeps_one_request_in_flight() -> None:
    environ = {
        "PGSHOVEL_KAFKA_API_VERSION_REQUEST": "false",
        "PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK": "0.9.0.1",
    }
    settings = producer_settings("b:9092", properties(environ))
    assert settings["max.in.flight.requests.per.connection"] == "1"
    assert settings.items() >= BROKER_09.items()


def test_consumer_leaves_out_empty_properties_and_keeps_its_own() -> None:
    settings = consumer_settings("b:9092", {"auto.offset.reset": "", **properties({})})
    assert settings["auto.offset.reset"] == "error"
    assert "api.version.request" not in settings and "client.id" not in settings
    assert settings["linger.ms"] == "7"
