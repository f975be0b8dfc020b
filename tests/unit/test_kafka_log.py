"""librdkafka's broker-compatibility warnings: one short line per process, the rest at DEBUG."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from pgshovel import _kafka_log
from pgshovel._kafka_log import kafka_logger

CONFWARN = (
    "CONFWARN [rdkafka#consumer-{n}] [thrd:app]: Configuration property {name} is deprecated: "
    "**Post-deprecation actions: remove this configuration property, brokers < 0.10.0 won't "
    "be supported anymore in librdkafka 3.x.** " + "x" * 800
)


@pytest.fixture
def fresh() -> Iterator[None]:
    _kafka_log._warned = False
    yield
    _kafka_log._warned = False
    _kafka_log.verbose(False)


def _emit(logger: logging.Logger, clients: int) -> None:
    for n in range(clients):
        for name in _kafka_log.BROKER_COMPATIBILITY:
            logger.warning("%s", CONFWARN.format(n=n, name=name))


def test_once_per_process_in_one_short_line(fresh: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _emit(kafka_logger("pgshovel.test.producer"), 3)
    _emit(kafka_logger("pgshovel.test.consumer"), 4)  # another client's logger: still once
    kafka_logger("pgshovel.test.consumer").warning("CONFWARN [x]: something else entirely")
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0] == (
        "librdkafka calls api.version.request and broker.version.fallback deprecated: they "
        "are for Kafka brokers older than 0.10 (as the sandbox's 0.9); leave them out of the "
        "configuration for a newer broker"
    )
    assert lines[1] == "CONFWARN [x]: something else entirely"


def test_verbose_lets_every_line_through(fresh: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _kafka_log.verbose(True)
    _emit(kafka_logger("pgshovel.test.verbose"), 2)
    assert len(caplog.records) == 4
    assert all("Configuration property" in record.getMessage() for record in caplog.records)
