"""The relay reconnects with its set as it is now: a table removed by ``set update`` stays out.

A table topic's snapshot of ``big`` is under way (small chunks) when ``set
update`` removes ``big`` from the set, which stops the snapshot. Then the
relay's source connections are killed: it reconnects and hands its table-topic
output the set's configuration. With the configuration it read at start (what
it did before the set watch), ``big`` came back and its snapshot went on from
where it stopped; with the set as it is now it never comes back.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg2
import pytest
import yaml
from kazoo.client import KazooClient

from pgshovel.admin import planning, twophase
from pgshovel.cluster.sets import parse_set_document
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import context
from tests.integration.capture._capture import SET, install
from tests.integration.relay._relay import (
    RelayProcess,
    queue_drained,
    terminate,
    wait_for,
    write_relay_yml,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = """
CREATE TABLE items (id integer PRIMARY KEY, v integer NOT NULL);
CREATE TABLE big (id integer PRIMARY KEY, payload text NOT NULL);
INSERT INTO big SELECT g, repeat('b', 50) FROM generate_series(1, 20000) g;
"""


def test_a_table_removed_by_set_update_does_not_come_back_after_a_reconnect(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: KazooClient,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    connection = psycopg2.connect(database)
    with connection, connection.cursor() as cursor:
        cursor.execute(SCHEMA)
    connection.close()
    install(zookeeper, cluster_name, database, [{"name": "items"}, {"name": "big"}])
    config = write_relay_yml(tmp_path, sandbox)
    document = yaml.safe_load(config.read_text())
    document["writer"]["configuration"]["set_topic"] = False
    document["writer"]["configuration"]["table_topics"] = {
        "prefix": cluster_name,
        "snapshot_chunk_rows": 100,
    }
    config.write_text(yaml.safe_dump(document))
    relay = RelayProcess(sandbox, cluster_name, config, tmp_path / "relay.log")
    try:
        wait_for(lambda: "snapshot of public.big starts" in relay.output(), 120, "big's snapshot")
        document = {"database": {"dsn": database}, "tables": [{"name": "items"}]}
        with context(zookeeper, cluster_name) as ctx:
            plan = planning.plan_set_update(ctx, SET, parse_set_document(document, "test"))
            twophase.execute(plan, ctx.connections, zookeeper)
        wait_for(
            lambda: (
                "public.big left the set or was dropped: its topic's snapshot stops"
                in relay.output()
            ),
            120,
            "the removal to stop big's snapshot while it is under way",
            relay.output,
        )
        connected = relay.output().count("connected to database")
        assert terminate(sandbox.postgres_dsn, "pgshovel-relay") > 0
        wait_for(
            lambda: relay.output().count("connected to database") > connected,
            120,
            "the relay to reconnect",
            relay.output,
        )
        connection = psycopg2.connect(database)
        with connection, connection.cursor() as cursor:
            cursor.execute("INSERT INTO items SELECT g, g FROM generate_series(1, 50) g")
        connection.close()
        wait_for(lambda: queue_drained(database, cluster_name), 120, "the relay to drain")
        assert relay.alive(), relay.output()
    finally:
        assert relay.stop() == 0, relay.output()
    log = relay.output()
    after = log[log.index("its topic's snapshot stops") :]
    assert not re.search(r"snapshot of public\.big (starts|goes on)", after), after[-3000:]
    assert "set 'capture' changed: version" in log and "table 'public'.'big' left the set" in log
