"""Fixtures of the end-to-end tests: every relay and worker process a test starts is stopped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.relay._relay import RelayProcess

from ._stack import WorkerProcess


@pytest.fixture
def processes() -> Iterator[list[RelayProcess | WorkerProcess]]:
    """Relay and worker processes a test starts; whatever still runs is killed after it."""
    started: list[RelayProcess | WorkerProcess] = []
    yield started
    for process in started:
        if isinstance(process, WorkerProcess):
            process.ensure_stopped()
        else:
            process.kill()
