"""`pgshovel-admin set tail` prints exactly the committed mutations as JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import psycopg2
import pytest
import yaml

from pgshovel.sandbox import SandboxConnection
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import (
    RelayProcess,
    install,
    queue_drained,
    topic_of,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay._table_topics import create_topic
from tests.integration.relay.test_relay import prepare

pytestmark = [pytest.mark.integration]

ADMIN = Path(sys.executable).with_name("pgshovel-admin")
SCHEMA = Path(__file__).with_name("debezium_envelope.schema.json")


@pytest.mark.parametrize("partitions", [1, 3])
def test_tail_prints_committed_mutations(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    tmp_path: Path,
    partitions: int,
) -> None:
    """The same lines from a one-partition set topic and from a partitioned one (joined as
    the worker joins it: each batch once every partition committed it)."""
    prepare(database, zookeeper, cluster_name)
    config = write_relay_yml(tmp_path, sandbox)
    if partitions > 1:
        # a 0.9 broker makes a topic of one partition: the operator creates it first
        create_topic(sandbox, topic_of(cluster_name), partitions=partitions)
        document = yaml.safe_load(config.read_text())
        document["writer"]["configuration"]["partitions"] = partitions
        config.write_text(yaml.safe_dump(document))
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        connection = psycopg2.connect(database)
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (1, 10, 'it''s \"quoted\"'), (2, 20, NULL)")
            connection.commit()
            cursor.execute("INSERT INTO items VALUES (3, 30, 'never')")
            connection.rollback()
            cursor.execute("UPDATE items SET id = 5, value = 11 WHERE id = 1")
            cursor.execute("DELETE FROM items WHERE id = 2")
            connection.commit()
        connection.close()
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay to drain")
    finally:
        assert relay.stop() == 0, relay.output()
    environment = {**os.environ, **sandbox.environment(), "PGSHOVEL_CLUSTER": cluster_name}
    result = subprocess.run(
        [str(ADMIN), "set", "tail", SET],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    announcement, *lines = lines
    assert (announcement["operation"], announcement["kind"]) == ("SCHEMA", "ANNOUNCE")
    assert announcement["columns"][0] == {"name": "id", "type": "integer", "not_null": True}
    assert announcement["key"] == ["id"]
    assert [(line["operation"], line["table"]) for line in lines] == [
        ("INSERT", "items"),
        ("INSERT", "items"),
        ("UPDATE", "items"),
        ("DELETE", "items"),
    ]
    # Typed JSON: integers are numbers, text is text, NULL is null.
    assert lines[0]["new"] == {"id": 1, "value": 10, "note": 'it\'s "quoted"'}
    assert lines[1]["new"]["note"] is None
    assert lines[2]["old"]["id"] == 1 and lines[2]["new"]["id"] == 5
    assert lines[3]["old"]["id"] == 2 and lines[3]["new"] is None
    assert lines[0]["transaction"] == lines[1]["transaction"] != lines[2]["transaction"]
    assert all(line["key_columns"] == ["id"] for line in lines)
    assert "never" not in result.stdout

    debezium = _tail(environment, "--format", "debezium")
    events = [json.loads(line) for line in debezium.splitlines()]
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for event in events:
        validator.validate(event)
    # The key change 1 -> 5 is a delete of key 1 and an insert of key 5, as Debezium has it.
    assert [(e["op"], (e["after"] or e["before"])["id"]) for e in events] == [
        ("c", 1),
        ("c", 2),
        ("d", 1),
        ("c", 5),
        ("d", 2),
    ]
    assert events[3]["after"] == {"id": 5, "value": 11, "note": 'it\'s "quoted"'}
    assert {e["source"]["connector"] for e in events} == {"pgshovel"}
    assert events[0]["source"]["txId"] == lines[0]["transaction"]

    # --latest starts at the end: nothing already published is printed.
    assert _tail(environment, "--latest") == ""
    if partitions > 1:
        refused = subprocess.run(
            [str(ADMIN), "set", "tail", SET, "--offset", "0"],
            capture_output=True,
            text=True,
            env=environment,
            timeout=60,
            check=False,
        )
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert refused.returncode != 0 and len(errors) == 1, refused.stderr
        assert "3 partitions" in errors[0] and "--latest" in errors[0], refused.stderr


def _tail(environment: dict[str, str], *options: str) -> str:
    result = subprocess.run(
        [str(ADMIN), "set", "tail", SET, *options],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tail_latest_follow_prints_only_new_batches(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    environment = {**os.environ, **sandbox.environment(), "PGSHOVEL_CLUSTER": cluster_name}
    connection = psycopg2.connect(database)
    connection.autocommit = True
    tail = None
    try:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (1, 1, 'old')")
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay to drain")
        tail = subprocess.Popen(
            [str(ADMIN), "set", "tail", SET, "--latest", "--follow", "--limit", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        key = 100
        while tail.poll() is None and key < 400:
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO items VALUES (%s, 1, 'new')", (key,))
            key += 1
            time.sleep(0.3)
        output, errors = tail.communicate(timeout=30)
    finally:
        if tail is not None and tail.poll() is None:
            tail.kill()
            tail.wait()
        connection.close()
        assert relay.stop() == 0, relay.output()
    assert tail.returncode == 0, errors
    [line] = [json.loads(text) for text in output.splitlines()]
    assert line["operation"] == "INSERT" and line["new"]["note"] == "new"
    assert line["new"]["id"] >= 100


MOMENTS = (
    "CREATE TABLE moments ("
    " id integer PRIMARY KEY, at timestamptz, local timestamp, day date, ats timestamptz[])"
)
ROWS = """
INSERT INTO moments VALUES
    (1, '294276-12-31 23:59:59.999999+00', '294276-12-31 23:59:59.999999', '5874897-12-31',
     ARRAY['294247-01-10 04:00:54.775808+00', '2024-01-02 03:04:05+00']::timestamptz[]),
    (2, '4714-11-24 00:00:00+00 BC', '4714-11-24 00:00:00 BC', '4714-11-24 BC', '{}'),
    (3, 'infinity', '-infinity', '0001-01-01 BC', NULL);
"""


def test_tail_prints_the_whole_temporal_range_in_iso_form(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    """Past 294247-01-10 a timestamp travels as text in the protocol: JSON keeps ISO 8601."""
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute(MOMENTS)
    connection.close()
    install(zookeeper, cluster_name, database, [{"name": "moments"}])
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    try:
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute(ROWS)
        connection.close()
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the relay to drain")
    finally:
        assert relay.stop() == 0, relay.output()
    environment = {**os.environ, **sandbox.environment(), "PGSHOVEL_CLUSTER": cluster_name}
    expected: dict[int, dict[str, Any]] = {
        1: {
            "at": "+294276-12-31T23:59:59.999999Z",
            "local": "+294276-12-31T23:59:59.999999",
            "day": "+5874897-12-31",
            "ats": ["+294247-01-10T04:00:54.775808Z", "2024-01-02T03:04:05Z"],
        },
        2: {
            "at": "-4713-11-24T00:00:00Z",
            "local": "-4713-11-24T00:00:00",
            "day": "-4713-11-24",
            "ats": [],
        },
        3: {"at": "infinity", "local": "-infinity", "day": "0000-01-01", "ats": None},
    }
    lines = [json.loads(line) for line in _tail(environment).splitlines()]
    inserted = {line["new"]["id"]: line["new"] for line in lines if line["operation"] == "INSERT"}
    assert inserted == {key: {"id": key, **row} for key, row in expected.items()}
    events = [json.loads(line) for line in _tail(environment, "--format", "debezium").splitlines()]
    created = {event["after"]["id"]: event["after"] for event in events if event["op"] == "c"}
    assert created == inserted
