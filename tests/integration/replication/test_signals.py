"""A stop signal to the worker's whole process group ends it after a micro-batch, exit 0.

Ctrl-C in a terminal sends SIGINT, and systemd's default kill mode SIGTERM, to
every process of the worker's group: the driver and Spark's JVM. The first
must stop the worker after the micro-batch in progress (PySpark's own SIGINT
handler would make it exit 130 at once), and neither may end it in a
traceback from a JVM that the same signal took down. The stream is published
while the worker runs (a live source); after each stop the stored state lets a
new worker converge to the source exactly.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection
from pgshovel.sandbox._children import signal_group
from pgshovel.stream.publisher import Publisher

from ._process import WorkerProcess, wait_for, write_replication_yml
from ._recording import RecordingSource
from ._support import dump, ensure_topic, execute, publish, set_configuration
from .test_stream import stored_offset

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

TABLE = ("public", "counters")
ROWS = 200


class LivePublisher(threading.Thread):
    """Commits small transactions in the source and publishes each as one batch until stopped."""

    def __init__(self, source: str, kafka_config: dict[str, str], topic: str) -> None:
        super().__init__()
        self.source, self.kafka_config, self.topic = source, kafka_config, topic
        self.published = 0  # messages on the topic
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        recorder = RecordingSource(self.source, [TABLE])
        publisher = Publisher(epoch=1)
        try:
            batch = 0
            while not self.halt.wait(0.02):
                for step in range(5):
                    key = (batch * 5 + step) % ROWS + 1
                    recorder.change(
                        TABLE,
                        "UPDATE counters SET n = n + 1 WHERE id = %s",
                        (key,),
                        old_key=(str(key),),
                        new_key=(str(key),),
                    )
                messages = recorder.commit().frame(publisher)
                publish(self.kafka_config, self.topic, messages)
                self.published += len(messages)
                batch += 1
        except BaseException as error:  # reported by the test
            self.error = error
        finally:
            recorder.close()


def test_sigint_and_sigterm_to_the_process_group_stop_after_a_micro_batch(
    sandbox: SandboxConnection,
    make_database: Any,
    kafka_config: dict[str, str],
    topic: str,
    cluster_name: str,
    zookeeper: KazooClient,
    tmp_path: Path,
    worker_processes: list[WorkerProcess],
) -> None:
    source, target = make_database("source"), make_database("target")
    execute(
        source,
        "CREATE TABLE counters (id bigint PRIMARY KEY, n bigint NOT NULL);"
        f"INSERT INTO counters SELECT i, 0 FROM generate_series(1, {ROWS}) AS i",
    )
    configuration = set_configuration(source, [TABLE])
    zookeeper.create(f"/{cluster_name}/sets/set", configuration.SerializeToString(), makepath=True)
    ensure_topic(kafka_config, topic)
    replication_yml = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        topic,
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": target},
        },
        max_batch_messages=7,
    )

    def start(name: str) -> WorkerProcess:
        worker = WorkerProcess(
            replication_yml, cluster_name, sandbox.zookeeper_hosts, tmp_path / name
        )
        worker_processes.append(worker)
        return worker

    live = LivePublisher(source, kafka_config, topic)
    live.start()
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            worker = start(f"worker-{signum}.log")
            before = stored_offset(target)
            wait_for(
                lambda: stored_offset(target) > before + 50,  # noqa: B023
                "the worker to stream",
                worker,
                seconds=300,
            )
            assert signal_group(worker.pid, signum), "the worker's process group"
            code = worker.process.wait(timeout=120)
            log = worker.output()
            assert code == 0, log[-3000:]
            assert f"signal {signum}: stopping after the step in progress" in log, log[-3000:]
            for trouble in ("Traceback", "ConnectionRefusedError", "Py4J"):
                assert trouble not in log, log[-3000:]
            assert live.error is None and live.is_alive(), live.error
    finally:
        live.halt.set()
        live.join(60)
    assert live.error is None, live.error
    end = live.published - 1
    # The state each stop left is exact: a new worker converges to the source.
    worker = start("worker.log")
    wait_for(lambda: stored_offset(target) == end, "the end of the stream", worker, 300)
    assert worker.stop() == 0
    assert dump(target, *TABLE) == dump(source, *TABLE)
