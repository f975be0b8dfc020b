"""A row too large for Kafka: the relay stops with one line naming it, the remedy lets it go on.

The sandbox's Kafka 0.9 takes messages of about 1 MB (``message.max.bytes``
1000012) and librdkafka's producer sends at most 1000000 bytes: a 2 MB text
value cannot be published. With ``on_error: exit`` the relay exits 1 with the
error (table, key, size and every setting to raise), nothing of that batch or
after it reaches the set topic, and once the limits are raised as the error
says (the producer's ``message.max.bytes`` in relay.yml, the topic's
``max.message.bytes`` with kafka-configs.sh) a restarted relay publishes the
row and everything after it, in order (a broker that still refuses it in the moment before it
applies the topic's new limit gets the batch again; the set topic never has
a gap).
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg2
import pytest
import yaml

from pgshovel.sandbox import SandboxConnection
from pgshovel.sandbox._topics import kafka_tool
from tests.integration.relay._relay import (
    RelayProcess,
    queue_drained,
    read_topic,
    replay,
    topic_of,
    validated,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay.test_relay import prepare, source_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BIG = 2_000_000
LIMIT = 4_000_000


def execute(dsn: str, statement: str, *arguments: object) -> None:
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(statement, arguments)
    finally:
        connection.close()


def raise_topic_limit(sandbox: SandboxConnection, topic: str, limit: int) -> None:
    """The remedy's broker part: the topic's ``max.message.bytes``, with kafka-configs.sh."""
    arguments = ["--alter", "--entity-type", "topics", "--entity-name", topic]
    arguments += ["--add-config", f"max.message.bytes={limit}"]
    # it asks whether the consumers' and replicas' limits follow
    result = kafka_tool(sandbox, "kafka-configs.sh", arguments, "y\n")
    assert result.returncode == 0 and "Updated config for topic" in result.stdout, (
        result.stdout + result.stderr
    )


def published_ids(kafka_config: dict[str, str], topic: str) -> list[int]:
    """The ids of every row the set topic's committed batches hold (the stream validated)."""
    messages = read_topic({**kafka_config, "fetch.message.max.bytes": str(LIMIT)}, topic)
    return [
        column.value.int64
        for batch in validated(messages)
        for mutation in batch.mutations
        for column in mutation.new.columns
        if column.name == "id"
    ]


def test_a_row_too_large_stops_the_relay_until_the_limits_are_raised(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    prepare(database, zookeeper, cluster_name)
    topic = topic_of(cluster_name)
    relay = RelayProcess(
        sandbox, cluster_name, write_relay_yml(tmp_path, sandbox), tmp_path / "relay.log"
    )
    try:
        execute(database, "INSERT INTO items VALUES (1, 1, 'small')")
        wait_for(lambda: queue_drained(database, cluster_name), 60, "the first row", relay.output)
        execute(database, "INSERT INTO items VALUES (2, 2, repeat('x', %s))", BIG)
        execute(database, "INSERT INTO items VALUES (3, 3, 'after')")
        wait_for(lambda: not relay.running(), 120, "the relay to exit", relay.output)
    finally:
        status = relay.stop()
    assert status == 1, relay.output()
    last = relay.output().strip().splitlines()[-1]
    assert last.startswith('error: table public.items, key {"id":2}, batch '), last
    size = re.search(r"a message of (\d+) bytes to topic " + re.escape(repr(topic)), last)
    assert size is not None and BIG < int(size.group(1)) < BIG + 1000, last
    for setting in (
        "message.max.bytes",
        "replica.fetch.max.bytes",
        "max.message.bytes",
        "fetch.message.max.bytes",
        "max.partition.fetch.bytes",
    ):
        assert setting in last, last
    # Nothing of the refused batch, nor of anything after it, is on the set topic.
    assert published_ids(kafka_config, topic) == [1]

    # Half the remedy: the producer's limit only. The broker refuses the message after it
    # was sent; it went alone, so the set topic has no gap and holds nothing after it.
    raised = write_relay_yml(tmp_path, sandbox)
    document = yaml.safe_load(raised.read_text())
    document["writer"]["configuration"]["properties"]["message.max.bytes"] = LIMIT
    raised.write_text(yaml.safe_dump(document))
    relay = RelayProcess(sandbox, cluster_name, raised, tmp_path / "relay-producer.log")
    try:
        wait_for(lambda: not relay.running(), 120, "the relay to exit", relay.output)
    finally:
        status = relay.stop()
    assert status == 1, relay.output()
    last = relay.output().strip().splitlines()[-1]
    assert last.startswith('error: table public.items, key {"id":2}, batch '), last
    assert "the broker refused a message of" in last and "max.message.bytes" in last, last
    assert published_ids(kafka_config, topic) == [1]

    # The rest of the remedy: the topic's limit. on_error: log, because the broker applies
    # a topic's new configuration a moment after kafka-configs.sh changed it: a relay that
    # meets the old limit in that moment sends the batch again.
    raise_topic_limit(sandbox, topic, LIMIT)
    document["on_error"], document["retry_interval"] = "log", 1.0
    raised.write_text(yaml.safe_dump(document))
    relay = RelayProcess(sandbox, cluster_name, raised, tmp_path / "relay-raised.log")
    try:
        execute(database, "INSERT INTO items VALUES (4, 4, 'later')")
        wait_for(lambda: queue_drained(database, cluster_name), 90, "the relay", relay.output)
    finally:
        assert relay.stop() == 0, relay.output()
    assert published_ids(kafka_config, topic) == [1, 2, 3, 4]
    messages = read_topic({**kafka_config, "fetch.message.max.bytes": str(LIMIT)}, topic)
    assert replay(validated(messages)) == source_rows(database)
