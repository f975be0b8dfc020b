"""The worker's ``on_error``: a data error ends it (exit) or it starts over from its state (log)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from pgshovel.abc import Loader, Stream, Target
from pgshovel.errors import SchemaError
from pgshovel.protocol import configuration_pb2
from pgshovel.replication.config import ReplicationConfiguration, SparkSettings
from pgshovel.replication.worker import Worker
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import WorkerState


def worker(on_error: str) -> Worker:
    configuration = ReplicationConfiguration(
        spark=SparkSettings(),
        loader=cast(Loader, None),
        stream=cast(Stream, None),
        target=cast(Target, None),
        on_error=on_error,  # type: ignore[arg-type]
        retry_interval=0.0,
    )
    set_configuration = configuration_pb2.ReplicationSetConfiguration()
    set_configuration.database.dsn = "dbname=source"
    return Worker("cluster", "set", set_configuration, configuration, spark=None)


def failing_once(error: Exception, result: WorkerState) -> Callable[..., Any]:
    calls: list[int] = []

    def run(_should_stop: object, _on_success: object) -> WorkerState:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return result

    return run


STATE = WorkerState("streaming", "10:10:", StreamPosition.start((5,)))


def test_a_data_error_ends_the_worker_by_default() -> None:
    subject = worker("exit")
    error = SchemaError("batch 7 holds a mutation on 'public'.'b', which is not a table of the set")
    subject._run = failing_once(error, STATE)  # type: ignore[method-assign]
    with pytest.raises(SchemaError, match="not a table of the set"):
        subject.run()
    assert subject.metrics.errors == 1


def test_with_on_error_log_a_data_error_is_logged_and_the_worker_starts_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    subject = worker("log")
    error = SchemaError("batch 7 holds a mutation on 'public'.'b', which is not a table of the set")
    subject._run = failing_once(error, STATE)  # type: ignore[method-assign]
    assert subject.run() is STATE
    assert subject.metrics.errors == 1
    assert "not a table of the set (on_error: log; retrying in 0.0s" in caplog.text
