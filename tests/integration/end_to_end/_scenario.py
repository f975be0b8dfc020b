"""One end-to-end run: a captured source, the relay, the worker, the workload, and their logs.

``Scenario`` creates and fills the source, installs the capture set (as
``pgshovel-admin`` does), and starts the real ``pgshovel-relay`` and
``pgshovel-replicate`` processes with logs under the test's directory; the
tests decide when to write, kill and restart. ``captured_source`` is the
other way in: a source made from a test's own schema SQL, its tables captured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import yaml
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection
from tests.integration.capture._capture import install
from tests.integration.relay._relay import RelayProcess, topic_of, write_relay_yml

from ._schema import Table, create_source
from ._stack import WorkerProcess, wait_caught_up, wait_until, write_replication_yml

Processes = list[RelayProcess | WorkerProcess]


def captured_source(
    make_database: Callable[[str], str],
    zookeeper: KazooClient,
    cluster: str,
    schema_sql: str,
    tables: Sequence[str],
    **install_options: Any,
) -> str:
    """A new source database holding ``schema_sql``, its ``tables`` (public names) a capture set;
    ``install_options``: ``install``'s (``packing=...``, ``allow_unkeyed=...``)."""
    source = make_database("source")
    with psycopg2.connect(source) as connection, connection.cursor() as cursor:
        cursor.execute(schema_sql)
    connection.close()
    install(zookeeper, cluster, source, [{"name": name} for name in tables], **install_options)
    return source


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

    def replication_yml(self, target: Mapping[str, Any], **options: Any) -> Path:
        """``replication.yml`` in the run's directory: the run's topic into ``target`` (a spec);
        ``options``: ``write_replication_yml``'s (``ranges_per_table=...``)."""
        return write_replication_yml(
            self.directory / "replication.yml", self.kafka_config, self.topic, target, **options
        )

    def start_streaming(
        self, configuration: Path, progress: Callable[[], tuple[int | None, int]]
    ) -> tuple[RelayProcess, WorkerProcess]:
        """A relay (not waited for) and a worker, once the worker streams (see ``streaming``)."""
        relay, worker = self.start_relay(lead=False), self.start_worker(configuration)
        self.streaming(worker, progress)
        return relay, worker

    def start_relay(self, lead: bool = True, **writer: Any) -> RelayProcess:
        """A new relay process (log ``relay-N.log``); returns once it leads the set (a killed
        one's session expired), at once with ``lead=False``.
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
        if lead:
            wait_until(
                lambda: "leading" in relay.output(),
                "the relay to lead",
                60,
                relay.alive,
                relay.output,
            )
        return relay

    def start_worker(self, configuration: Path, log: Path | None = None) -> WorkerProcess:
        """A new worker process, its output appended to ``log`` (default: ``worker.log``, one log
        for every worker of the run)."""
        worker = WorkerProcess(self.sandbox, self.cluster, configuration, log or self.worker_log)
        self.processes.append(worker)
        self.workers.append(worker)
        return worker

    def streaming(
        self,
        worker: WorkerProcess,
        progress: Callable[[], tuple[int | None, int]],
        what: str = "the worker to stream",
        timeout: float = 180.0,
    ) -> None:
        """Wait until ``progress()`` (a copy's (stored offset, tasks left)) shows an offset."""
        wait_until(lambda: progress()[0] is not None, what, timeout, worker.alive, worker.output)

    def wait_caught_up(
        self,
        worker: WorkerProcess,
        stored_offset: Callable[[], int | None],
        timeout: float = 180.0,
    ) -> int:
        """Wait for the relay to drain the queue and ``worker`` to store the topic's end."""
        return wait_caught_up(
            self.source,
            self.cluster,
            self.kafka_config,
            self.topic,
            stored_offset,
            worker.alive,
            worker.output,
            timeout,
        )
