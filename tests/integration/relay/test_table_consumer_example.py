"""example/table_consumer.py (the README's plain Kafka consumer) folds a table topic on the sandbox.

A relay publishes the set's table as a ``format: json`` table topic (its snapshot, then
inserts, an update and a delete); the example, run as a user runs it with the variables
``pgshovel-sandbox env`` exports, prints exactly the source's rows. Without the broker
properties those variables carry, it would read nothing from the sandbox's Kafka 0.9.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest
import yaml
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection
from pgshovel.sandbox._java import java_executable, kafka_libs
from pgshovel.sandbox._render import KAFKA_CHROOT
from tests.integration.relay._relay import (
    RelayProcess,
    install,
    queue_drained,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay._table_topics import read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]


def test_the_consumer_example_prints_the_source_table(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: KazooClient,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE items (id integer PRIMARY KEY, label text)")
        cursor.execute("INSERT INTO items SELECT n, 'before ' || n FROM generate_series(1, 5) n")
    install(zookeeper, cluster_name, database, [{"name": "items"}])
    config = write_relay_yml(tmp_path, sandbox)
    document = yaml.safe_load(config.read_text())
    document["writer"]["configuration"]["set_topic"] = False
    document["writer"]["configuration"]["table_topics"] = {"prefix": cluster_name, "format": "json"}
    config.write_text(yaml.safe_dump(document))
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        wait_for(lambda: "leading" in relay.output(), 60, "the relay to lead", relay.output)
        with connection, connection.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (6, 'inserted'), (7, 'gone soon')")
            cursor.execute("UPDATE items SET label = 'updated' WHERE id = 2")
        with connection, connection.cursor() as cursor:
            cursor.execute("DELETE FROM items WHERE id IN (3, 7)")
            cursor.execute("SELECT id, label FROM items ORDER BY id")
            source = cursor.fetchall()
        wait_for(lambda: queue_drained(database, cluster_name), 120, "the relay to drain")
    finally:
        relay.stop()
    connection.close()

    result = subprocess.run(
        [sys.executable, "-m", "example.table_consumer", f"{cluster_name}.items", "--idle", "5"],
        cwd=ROOT,
        env={**os.environ, **sandbox.environment()},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(row["key"]["id"], row["row"]["label"]) for row in rows] == source
    # The shell command shows every message, the snapshot's and the changes' (in whatever order
    # the relay interleaved them), as key TAB value.
    held = read_all(sandbox.kafka_config(), f"{cluster_name}.items")
    shell = console_consumer(sandbox, f"{cluster_name}.items", messages=len(held))
    lines = shell.splitlines()
    assert len(lines) == len(held), shell
    assert '{"id":1}\t{"id":1,"label":"before 1"}' in lines, shell
    assert '{"id":3}\tnull' in lines, shell
    assert source == [
        (1, "before 1"),
        (2, "updated"),
        (4, "before 4"),
        (5, "before 5"),
        (6, "inserted"),
    ]


def console_consumer(sandbox: SandboxConnection, topic: str, messages: int) -> str:
    """The README's shell command: Kafka 0.9's console consumer, which needs --zookeeper."""
    tool = kafka_libs().parent / "bin" / "kafka-console-consumer.sh"
    java_home = str(Path(java_executable()).resolve().parent.parent)
    result = subprocess.run(
        [
            str(tool),
            "--zookeeper",
            f"{sandbox.zookeeper_hosts}{KAFKA_CHROOT}",
            "--topic",
            topic,
            "--from-beginning",
            "--property",
            "print.key=true",
            "--max-messages",
            str(messages),
        ],
        env={**os.environ, "JAVA_HOME": java_home},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
