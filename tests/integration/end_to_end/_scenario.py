"""One end-to-end run: a captured source, the relay, the worker, the workload, and their logs.

``Scenario`` creates and fills the source, installs the capture set (as
``pgshovel-admin`` does), and starts the real ``pgshovel-relay`` and
``pgshovel-replicate`` processes with logs under the test's directory; the
tests decide when to write, kill and restart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection
from tests.integration.capture._capture import install
from tests.integration.relay._relay import RelayProcess, topic_of, write_relay_yml

from ._schema import Table, create_source
from ._stack import WorkerProcess, wait_caught_up, wait_until

Processes = list[RelayProcess | WorkerProcess]


@dataclass
class Scenario:
    """The pieces of one run; ``processes`` is the fixture list that stops them after the test."""

    sandbox: SandboxConnection
    cluster: str
    source: str
    directory: Path
    processes: Processes
    kafka_config: dict[str, str]
    relays: int = 0
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return topic_of(self.cluster)

    @property
    def worker_log(self) -> Path:
        return self.directory / "worker.log"

    def prepare(
        self,
        zookeeper: KazooClient,
        tables: Sequence[Table],
        rows: int,
        bulk_rows: int,
        seed: int,
        arrow_safe: bool = False,
    ) -> None:
        create_source(self.source, rows=rows, bulk_rows=bulk_rows, seed=seed, arrow_safe=arrow_safe)
        install(zookeeper, self.cluster, self.source, [table.set_entry() for table in tables])

    def start_relay(self, **writer: Any) -> RelayProcess:
        """A new relay process; returns once it leads the set (a killed one's session expired).
        ``writer``: more settings of the Kafka writer (``max_message_bytes=...``)."""
        config = write_relay_yml(self.directory, self.sandbox)
        if writer:
            document = yaml.safe_load(config.read_text())
            document["writer"]["configuration"].update(writer)
            config.write_text(yaml.safe_dump(document))
        self.relays += 1
        relay = RelayProcess(
            self.sandbox, self.cluster, config, self.directory / f"relay-{self.relays}.log"
        )
        self.processes.append(relay)
        wait_until(
            lambda: "leading" in relay.output(), "the relay to lead", 60, relay.alive, relay.output
        )
        return relay

    def start_worker(self, configuration: Path) -> WorkerProcess:
        worker = WorkerProcess(self.sandbox, self.cluster, configuration, self.worker_log)
        self.processes.append(worker)
        self.workers.append(worker)
        return worker

    def wait_caught_up(self, worker: WorkerProcess, stored_offset: Callable[[], int | None]) -> int:
        return wait_caught_up(
            self.source,
            self.cluster,
            self.kafka_config,
            self.topic,
            stored_offset,
            worker.alive,
            worker.output,
        )
