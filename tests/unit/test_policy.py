"""The error policy: transient faults retried with backoff, data errors follow on_error."""

from __future__ import annotations

import logging

import pytest

from pgshovel.errors import (
    BrokerUnavailable,
    CodecError,
    ConfigurationError,
    DatabaseUnavailable,
    StreamError,
)
from pgshovel.policy import ErrorPolicy


def _policy(on_error: str = "exit", max_backoff: float = 8.0) -> tuple[ErrorPolicy, list[float]]:
    waits: list[float] = []
    policy = ErrorPolicy(
        on_error,  # type: ignore[arg-type]
        waits.append,
        logging.getLogger("test.policy"),
        retry_interval=1.5,
        max_backoff=max_backoff,
    )
    return policy, waits


@pytest.mark.parametrize("on_error", ["exit", "log"])
def test_transient_faults_are_retried_whatever_on_error_says(on_error: str) -> None:
    policy, waits = _policy(on_error)
    for _ in range(10):
        policy.failed(DatabaseUnavailable("connection lost"))
    assert len(waits) == 10
    assert all(0.2 <= wait <= 8.2 for wait in waits), waits
    assert max(waits[5:]) > max(waits[:2]), "the backoff grows"
    assert policy.in_outage


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy, _ = _policy()
    with caplog.at_level(logging.DEBUG, logger="test.policy"):
        for _ in range(5):
            policy.failed(BrokerUnavailable("kafka down"))
        policy.succeeded()
        policy.succeeded()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings[0] == "kafka down; retrying with backoff until it is back"
    assert warnings[1].startswith("recovered after ") and "5 attempt(s)" in warnings[1]
    assert len(warnings) == 2
    assert not policy.in_outage


def test_a_data_error_ends_the_process_with_on_error_exit() -> None:
    policy, waits = _policy("exit")
    error = CodecError("cannot decode int4 text 'x'")
    with pytest.raises(CodecError) as raised:
        policy.failed(error)
    assert raised.value is error
    assert waits == []


def test_a_data_error_is_logged_and_retried_with_on_error_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy, waits = _policy("log")
    with caplog.at_level(logging.ERROR, logger="test.policy"):
        policy.failed(StreamError("sequence gap"))
    assert waits == [1.5]
    assert "sequence gap (on_error: log; retrying in 1.5s, nothing is skipped)" in caplog.text


@pytest.mark.parametrize("on_error", ["exit", "log"])
def test_a_configuration_error_always_ends_the_process(on_error: str) -> None:
    policy, waits = _policy(on_error)
    with pytest.raises(ConfigurationError):
        policy.failed(ConfigurationError("set 'x' does not exist"))
    assert waits == []
