"""The sandbox's services really work: PgQ batches, ZooKeeper watches, keyed Kafka messages.

Also drives a second sandbox through ``pgshovel-sandbox`` exactly as a user
would: ``up``, ``status``, ``env``, ``down`` (twice, then the purge it names),
which sandbox each finds from which directory, and recovery from a crash;
a Spark cluster added to it with ``up --spark-workers``, stopped with ``spark
down`` and with ``down``; and on the run's cluster, ``spark kill-worker`` and the
replacement ``up --spark-workers`` starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg2
import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, WatchedEvent

from pgshovel.sandbox import (
    SandboxConnection,
    SparkCluster,
    _process,
    data,
    discard_data,
    load,
    load_spark,
    start,
    status,
    stop,
    terminate,
)

pytestmark = pytest.mark.integration

SANDBOX_CLI = [sys.executable, "-m", "pgshovel.sandbox.cli"]


def test_pgq_queue_delivers_an_event_in_a_batch(database: str) -> None:
    connection = psycopg2.connect(database)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pgq")
            cursor.execute("SELECT pgq.create_queue('smoke')")
            cursor.execute("SELECT pgq.register_consumer('smoke', 'reader')")
            cursor.execute("SELECT pgq.insert_event('smoke', 'greeting', 'hello pgq')")
            cursor.execute("SELECT pgq.force_tick('smoke')")
            cursor.execute("SELECT pgq.ticker()")
            cursor.execute("SELECT pgq.next_batch('smoke', 'reader')")
            batch_id = cursor.fetchone()[0]  # type: ignore[index]
            assert batch_id is not None, "the ticker made no batch out of a committed event"
            cursor.execute("SELECT ev_type, ev_data FROM pgq.get_batch_events(%s)", (batch_id,))
            assert cursor.fetchall() == [("greeting", "hello pgq")]
            cursor.execute("SELECT pgq.finish_batch(%s)", (batch_id,))
            assert cursor.fetchone() == (1,)
    finally:
        connection.close()


def test_zookeeper_creates_reads_and_watches_a_node(
    zookeeper: KazooClient, cluster_name: str
) -> None:
    path = f"/{cluster_name}/node"
    zookeeper.create(path, b"first", makepath=True)
    changed = threading.Event()
    seen: list[WatchedEvent] = []

    def watch(event: WatchedEvent) -> None:
        seen.append(event)
        changed.set()

    data, _stat = zookeeper.get(path, watch=watch)
    assert data == b"first"
    zookeeper.set(path, b"second")
    assert changed.wait(10.0), "the data watch did not fire after the node changed"
    assert seen[0].type == EventType.CHANGED and seen[0].path == path
    assert zookeeper.get(path)[0] == b"second"


def test_kafka_round_trips_keyed_messages(kafka_config: dict[str, str], topic: str) -> None:
    sent = [(f"key-{n}".encode(), f"value {n} \u2603".encode()) for n in range(5)]
    sent.append((b"binary\x00key", bytes(range(256))))
    failures: list[object] = []
    producer = Producer(kafka_config)
    for key, value in sent:
        producer.produce(
            topic,
            key=key,
            value=value,
            on_delivery=lambda error, _message: failures.append(error) if error else None,
        )
    assert producer.flush(30.0) == 0 and failures == []

    consumer = Consumer(
        {**kafka_config, "group.id": f"{topic}-reader", "auto.offset.reset": "earliest"}
    )
    received: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30.0
        while len(received) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received.append((message.key(), message.value()))
    finally:
        consumer.close()
    assert received == sent


def test_sandbox_json_records_the_running_services(sandbox: SandboxConnection) -> None:
    recorded = load(Path(sandbox.state_dir))
    # Failure tests may restart the broker (new PID), the spark_cluster fixture may have
    # added its master; everything else stays as started.
    assert dataclasses.replace(recorded, pids={}, spark_master="") == dataclasses.replace(
        sandbox, pids={}, spark_master=""
    )
    assert set(recorded.pids) == {"postgres", "zookeeper", "kafka"}
    assert all(service.running for service in status(Path(sandbox.state_dir)))
    with psycopg2.connect(sandbox.source_dsn) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW max_prepared_transactions")
        assert int(cursor.fetchone()[0]) > 0  # type: ignore[index]
    connection.close()


@pytest.mark.slow
def test_cli_up_status_env_down(tmp_path: Path) -> None:
    """As the README uses it: ``up`` in a project, the other commands from inside it; from
    another directory only a sandbox ``up`` recorded there, never the project's."""
    project = tmp_path / "project"
    inside = project / "src" / "deep"
    inside.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    state_dir = project / ".sandbox"
    found_here = f"sandbox in {str(state_dir)!r} (the .sandbox of {str(project)!r})"

    def cli(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
        return _cli(tmp_path / "xdg-state", cwd, *arguments)

    try:
        up = cli(project, "up")  # no --state-dir: ./.sandbox
        assert up.returncode == 0, up.stderr
        pids = load(state_dir).pids
        assert set(pids) == {"postgres", "zookeeper", "kafka"}

        again = cli(inside, "up")  # the project's, found from a subdirectory
        assert again.returncode == 0 and "already running" in again.stderr
        assert load(state_dir).pids == pids

        # A Spark cluster on the running sandbox, stopped alone, then started again.
        spark_pids = _up_with_spark(cli, inside, state_dir)
        exports = cli(inside, "env")
        assert f"export PGSHOVEL_SPARK_MASTER={load(state_dir).spark_master}\n" in exports.stdout
        spark_down = cli(inside, "spark", "down")
        assert spark_down.returncode == 0, spark_down.stderr
        assert [pid for pid in spark_pids if _exists(pid)] == []
        assert load_spark(state_dir) is None and load(state_dir).spark_master == ""
        assert "PGSHOVEL_SPARK_MASTER" not in cli(inside, "env").stdout
        assert load(state_dir).pids == pids
        spark_pids = _up_with_spark(cli, inside, state_dir)
        pids = {**pids, **{f"spark {pid}": pid for pid in spark_pids}}

        # status says which sandbox it reports on, how it was found, and where its data is.
        report = cli(inside, "status")
        assert report.returncode == 0, report.stderr
        lines = report.stdout.splitlines()
        assert lines[0] == found_here
        assert lines[-1].startswith("data: ") and f"MB in {str(state_dir)!r}" in lines[-1]
        data_dir = Path(load(state_dir).postgres_data_dir)
        outside = not data_dir.is_relative_to(state_dir)
        # As root under pytest's private temporary directory, PostgreSQL's data moves to
        # the postgres user's home; status says so.
        assert (f"of PostgreSQL's in {str(data_dir.parent)!r}" in lines[-1]) == outside

        # From a directory the sandbox was not started for, nothing is picked silently.
        refused = cli(elsewhere, "status")
        assert refused.returncode == 1
        assert f"no .sandbox/sandbox.json in {str(elsewhere)!r}" in refused.stderr
        explicit = cli(elsewhere, "status", "--state-dir", str(state_dir))
        assert explicit.returncode == 0, explicit.stderr
        assert explicit.stdout.splitlines()[0] == f"sandbox in {str(state_dir)!r} (--state-dir)"
        # 'up --state-dir' run in another directory records the sandbox for it.
        assert cli(other, "up", "--state-dir", str(state_dir)).returncode == 0
        exports = cli(other, "env")
        assert exports.returncode == 0, exports.stderr
        assert exports.stderr.splitlines()[-1] == (
            f"pgshovel-sandbox env: sandbox in {str(state_dir)!r} "
            f"(recorded for {str(other)!r} by 'up')"
        )
        for name in (
            "PGSHOVEL_ZOOKEEPER_HOSTS",
            "PGSHOVEL_SOURCE_DSN",
            "PGSHOVEL_TARGET_DSN",
            "PGSHOVEL_POSTGRES_DSN",
            "PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS",
        ):
            assert f"export {name}=" in exports.stdout
        assert "export PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK=0.9.0.1\n" in exports.stdout
        assert "export PGSHOVEL_KAFKA_API_VERSION_REQUEST=false\n" in exports.stdout
        # The record names the sandbox and where up ran, for a refusal elsewhere to list.
        listed = cli(elsewhere, "env")
        assert listed.returncode == 1
        assert f"{str(state_dir)!r} (up in {str(other)!r})" in listed.stderr

        # down says the data stays, where and how much, and how to resume or delete it.
        down = cli(inside, "down")
        assert down.returncode == 0, down.stderr
        said = down.stdout.splitlines()
        assert said[0] == f"{found_here} stopped"
        assert said[1].startswith("its data stays: ") and f"in {str(state_dir)!r}" in said[1]
        assert ("of PostgreSQL's in" in said[1]) == outside
        assert said[2] == (
            f"'pgshovel-sandbox up --state-dir {state_dir}' starts it again with its data; "
            f"'pgshovel-sandbox down --purge --state-dir {state_dir}' deletes it"
        )
        assert [pid for pid in pids.values() if _exists(pid)] == []
        assert data_dir.is_dir(), "down keeps the data"
        assert cli(inside, "down").returncode == 0
        after = cli(inside, "status")
        assert after.returncode != 0 and "down" in after.stdout
        assert cli(inside, "env").returncode != 0
        # The purge down named, run as printed, deletes everything, PostgreSQL's data too.
        purge = shlex.split(said[2].split("; ", 1)[1].removesuffix("' deletes it").strip("'"))
        purged = cli(elsewhere, *purge[1:])
        assert purged.returncode == 0, purged.stderr
        assert purged.stdout.startswith(f"sandbox in {str(state_dir)!r} (--state-dir) purged: ")
    finally:
        cli(elsewhere, "down", "--purge", "--state-dir", str(state_dir))
    assert not state_dir.exists() and not data_dir.exists()
    # Purged and forgotten: nothing is found any more, and down has nothing to do.
    for directory in (inside, other):
        gone = cli(directory, "status")
        assert gone.returncode == 1 and "no sandbox found" in gone.stderr
        assert "recorded for other directories" not in gone.stderr
        assert cli(directory, "down").returncode == 0


@pytest.mark.slow
def test_up_recovers_from_a_crashed_run(tmp_path: Path) -> None:
    state_dir = tmp_path / "crashed-sandbox"
    try:
        crashed = start(state_dir)
        for pid in crashed.pids.values():
            os.kill(pid, signal.SIGKILL)

        recovered = start(state_dir)
        assert set(recovered.pids.values()).isdisjoint(crashed.pids.values())
        assert all(service.running for service in status(state_dir))
        assert recovered.postgres_data_dir == crashed.postgres_data_dir
        with psycopg2.connect(recovered.source_dsn) as connection, connection.cursor() as cursor:
            cursor.execute("SELECT current_database()")
            assert cursor.fetchone() == ("pgshovel_source",)
        connection.close()
        producer = Producer(recovered.kafka_config())
        producer.produce("after-crash", value=b"still works")
        assert producer.flush(30.0) == 0
        # What the test harness does after a failed run: the logs stay, the data goes,
        # PostgreSQL's too where it lives outside the state directory.
        stop(state_dir)
        postgres_root = Path(recovered.postgres_data_dir).parent
        outside = not postgres_root.is_relative_to(state_dir.resolve())
        places = data(state_dir)
        assert postgres_root.is_dir() and places[0].path == state_dir.resolve()
        assert [(place.path, place.outside) for place in places[1:]] == (
            [(postgres_root, True)] if outside else []
        )
        assert all(place.size > 0 for place in places)
        discard_data(state_dir)
        assert not postgres_root.exists()
        assert (state_dir / "postgres.log").is_file() and (state_dir / "sandbox.json").is_file()
        assert not (state_dir / "zookeeper").exists() and not (state_dir / "kafka").exists()
        assert [place.path for place in data(state_dir)] == [state_dir.resolve()]
    finally:
        stop(state_dir, purge=True)
    assert not state_dir.exists()


@pytest.mark.slow
def test_terminate_stops_a_sandbox_whose_directory_was_deleted(tmp_path: Path) -> None:
    state_dir = tmp_path / "deleted-sandbox"
    connection = start(state_dir)
    postgres_root = Path(connection.postgres_data_dir).parent
    try:
        shutil.rmtree(state_dir)
        stop(state_dir)  # nothing recorded any more: finds nothing to stop
        terminate(connection)
        assert [pid for pid in connection.pids.values() if _exists(pid)] == []
    finally:
        terminate(connection)
        shutil.rmtree(postgres_root, ignore_errors=True)
        with contextlib.suppress(OSError):  # shared by all such sandboxes: only if empty
            postgres_root.parent.rmdir()


def _up_with_spark(
    cli: Callable[..., subprocess.CompletedProcess[str]], cwd: Path, state_dir: Path
) -> list[int]:
    """``up --spark-workers 1`` on the running sandbox; the PIDs of its master and worker."""
    up = cli(cwd, "up", "--spark-workers", "1")
    assert up.returncode == 0, up.stderr
    cluster = load_spark(state_dir)
    assert cluster is not None and sorted(cluster.workers) == ["worker-1"]
    assert f"spark       {cluster.master_url}" in up.stdout
    assert load(state_dir).spark_master == cluster.master_url
    report = cli(cwd, "status")
    assert report.returncode == 0, report.stdout
    assert "spark-master" in report.stdout and "spark-worker-1" in report.stdout
    return [process.pid for process in cluster.processes()]


@pytest.mark.slow
@pytest.mark.spark
def test_cli_kill_worker_then_up_starts_a_replacement(
    sandbox: SandboxConnection, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    state_dir = Path(sandbox.state_dir)

    def cli(*arguments: str) -> subprocess.CompletedProcess[str]:
        return _cli(tmp_path / "xdg-state", tmp_path, *arguments, "--state-dir", str(state_dir))

    before = load_spark(state_dir)
    assert before is not None
    victim = before.workers["worker-2"]
    killed = cli("spark", "kill-worker", "worker-2")
    assert killed.returncode == 0, killed.stderr
    # This process started it (the fixture): gone once reaped here.
    assert _process.wait_exited(victim.pid, 30)
    down = cli("status")
    assert down.returncode == 1
    assert f"spark-worker-2 pid={victim.pid} port={victim.port} down" in down.stdout
    # The remedy the error names brings the cluster back in its shape.
    remedy = down.stderr.split("start it with ", 1)[1].strip().strip("'")
    assert "--spark-workers 2" in remedy, down.stderr
    up = _cli(tmp_path / "xdg-state", tmp_path, *shlex.split(remedy)[1:])
    assert up.returncode == 0, up.stderr
    after = load_spark(state_dir)
    assert after is not None and after.master == before.master
    assert after.workers["worker-1"] == before.workers["worker-1"]
    assert after.workers["worker-2"].pid != victim.pid
    assert cli("status").returncode == 0


def _cli(state_home: Path, cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``pgshovel-sandbox ARGUMENTS`` run in ``cwd``, with up's record under ``state_home``."""
    environment = {
        name: value for name, value in os.environ.items() if name != "PGSHOVEL_SANDBOX_DIR"
    }
    environment["XDG_STATE_HOME"] = str(state_home)
    return subprocess.run(
        [*SANDBOX_CLI, *arguments],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,  # up with a Spark cluster starts JVMs: slow on a loaded machine
        check=False,
    )


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
