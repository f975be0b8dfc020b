"""Fixtures of the replication worker's integration tests: one SparkSession per run, helpers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._process import WorkerProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A shared local SparkSession (starting one takes seconds)."""
    from pgshovel.replication.config import SparkSettings
    from pgshovel.replication.spark import spark_session

    session = spark_session(
        SparkSettings(
            master="local[2]",
            conf={
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
                "spark.sql.session.timeZone": "UTC",
            },
        )
    )
    yield session
    session.stop()


@pytest.fixture
def worker_processes() -> Iterator[list[WorkerProcess]]:
    """Worker subprocesses a test starts; whatever still runs is killed after the test."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.ensure_stopped()
