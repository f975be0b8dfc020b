"""Fixtures of the end-to-end tests: every relay and worker process a test starts is stopped;
the failover tests' primary and standby (``servers``) and their run (``start_run``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection, Server
from tests.integration.relay._relay import RelayProcess

from ._failover import Run, running_servers
from ._scenario import Processes
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


@pytest.fixture
def servers(sandbox: SandboxConnection) -> Iterator[tuple[Server, Server]]:
    """A primary and its streaming standby, stopped after the test."""
    with running_servers(sandbox) as pair:
        yield pair


@pytest.fixture
def start_run(
    sandbox: SandboxConnection,
    servers: tuple[Server, Server],
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> Callable[[list[str]], tuple[Run, str]]:
    """Start the set, relay (with ``standbys``) and worker on the primary; (run, target)."""

    def start(standbys: list[str]) -> tuple[Run, str]:
        target = make_database("target")
        run = Run(
            sandbox,
            zookeeper,
            cluster_name,
            servers[0],
            target,
            tmp_path,
            processes,
            kafka_config,
            standbys,
        )
        return run, target

    return start
