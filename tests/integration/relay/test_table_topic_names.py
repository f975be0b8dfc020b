"""Table topics that would collide: the relay refuses them with one line, and the remedy it names
lets it go on; Debezium's ``source.db`` defaults to the source database's name.

A table named ``transaction`` in ``public`` and Debezium's transaction topic are
both ``<prefix>.transaction``: a relay with ``transaction_topic: true`` exits
at start (a ``ConfigurationError``, whatever ``on_error`` says) naming the
table, the other topic and the relay.yml settings that separate them. With
``transaction_topic: false`` as the error says, the same relay publishes the
table into that topic, and every envelope's ``source.db`` is the source
database's name although relay.yml names none.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg2
import pytest
import yaml

from pgshovel.sandbox import SandboxConnection
from tests.integration.relay._relay import (
    RelayProcess,
    install,
    queue_drained,
    wait_for,
    write_relay_yml,
)
from tests.integration.relay._table_topics import fold, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_table_in_the_transaction_topic_is_refused_until_relay_yml_separates_them(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: object,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
) -> None:
    connection = psycopg2.connect(database)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute('CREATE TABLE "transaction" (id integer PRIMARY KEY, note text)')
            cursor.execute("SELECT current_database()")
            (name,) = cursor.fetchone()  # type: ignore[misc]
        install(zookeeper, cluster_name, database, [{"name": "transaction"}])
        prefix = f"{cluster_name}-names"
        path = write_relay_yml(tmp_path, sandbox)
        document = yaml.safe_load(path.read_text())
        document["writer"]["configuration"]["table_topics"] = {
            "prefix": prefix,
            "format": "debezium",
            "transaction_topic": True,
            "snapshot": False,
        }
        document["on_error"] = "log"  # a configuration error ends the relay all the same
        path.write_text(yaml.safe_dump(document))
        relay = RelayProcess(sandbox, cluster_name, path, tmp_path / "refused.log")
        try:
            wait_for(lambda: not relay.running(), 120, "the relay to exit", relay.output)
        finally:
            status = relay.stop()
        assert status == 1, relay.output()
        assert relay.output().strip().splitlines()[-1] == (
            "error: table 'public'.'transaction' and debezium's transaction topic "
            "(table_topics.transaction_topic: true) both publish into topic "
            f"'{prefix}.transaction'; set table_topics.transaction_topic: false or leave the "
            "table out of the table topics (relay.yml table_topics.exclude: [{schema: public, "
            "name: transaction}]), then restart the relay"
        )

        # The remedy the error names first.
        document["writer"]["configuration"]["table_topics"]["transaction_topic"] = False
        path.write_text(yaml.safe_dump(document))
        relay = RelayProcess(sandbox, cluster_name, path, tmp_path / "relay.log")
        try:
            with connection, connection.cursor() as cursor:
                cursor.execute("""INSERT INTO "transaction" VALUES (1, 'one'), (2, 'two')""")
            wait_for(lambda: queue_drained(database, cluster_name), 90, "the relay", relay.output)
        finally:
            assert relay.stop() == 0, relay.output()
    finally:
        connection.close()
    records = read_all(kafka_config, f"{prefix}.transaction")
    envelopes = [json.loads(value) for _, _, _, value in records if value is not None]
    assert [envelope["after"]["id"] for envelope in envelopes] == [1, 2]
    assert {envelope["source"]["db"] for envelope in envelopes} == {name}
    assert sorted(fold(records)) == [b'{"id":1}', b'{"id":2}']
