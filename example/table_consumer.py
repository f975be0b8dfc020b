"""A table topic folded into a dict by a plain Kafka consumer, knowing nothing of pgshovel.

``python -m example.table_consumer TOPIC`` reads a table topic (``format: json`` or
``debezium``) from its beginning, keeps the last row per key (a tombstone removes it) and,
once no message came for ``--idle`` seconds after the first (or none within ``--first``),
prints the table: one JSON line per row,
``{"key": ..., "row": ...}``, in key order. The broker comes from
``PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS``, and the two properties a Kafka older than 0.10 needs (the
sandbox's 0.9) from the variables ``pgshovel-sandbox env`` exports; with a modern broker they
stay unset and are left out. The README's "Consuming with a plain Kafka consumer" shows its
core.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from typing import Any

from confluent_kafka import Consumer

#: librdkafka property -> the variable ``pgshovel-sandbox env`` sets it from
BROKER_COMPATIBILITY = {
    "api.version.request": "PGSHOVEL_KAFKA_API_VERSION_REQUEST",
    "broker.version.fallback": "PGSHOVEL_KAFKA_BROKER_VERSION_FALLBACK",
}


def consumer_config(group: str) -> dict[str, str]:
    """The consumer's properties: the broker, a group, from the beginning, and compatibility."""
    config = {
        "bootstrap.servers": os.environ.get("PGSHOVEL_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        "group.id": group,
        "auto.offset.reset": "earliest",
    }
    for name, variable in BROKER_COMPATIBILITY.items():
        if os.environ.get(variable):
            config[name] = os.environ[variable]
    return config


def fold(topic: str, idle: float, first: float, group: str) -> dict[bytes, Any]:
    """The table in ``topic``: the last value per key, until ``idle`` seconds without a message
    (joining the group and the first fetch may take ``first`` seconds)."""
    consumer = Consumer(consumer_config(group))
    consumer.subscribe([topic])
    table: dict[bytes, Any] = {}
    last, wait = time.monotonic(), first
    try:
        while time.monotonic() - last < wait:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            last, wait = time.monotonic(), idle
            key = message.key() or b""
            value = message.value()
            if value is None:  # tombstone: the row is gone
                table.pop(key, None)
            else:  # format: json -> the row; debezium -> its ["after"]
                table[key] = json.loads(value)
    finally:
        consumer.close()
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("topic", help="a table topic, e.g. shop.items")
    parser.add_argument(
        "--idle", type=float, default=10.0, help="stop after this many seconds without a message"
    )
    parser.add_argument(
        "--first", type=float, default=60.0, help="seconds to wait for the first message"
    )
    parser.add_argument("--group", default=f"table-consumer-{uuid.uuid4().hex[:8]}")
    arguments = parser.parse_args()
    table = fold(arguments.topic, arguments.idle, arguments.first, arguments.group)
    for key in sorted(table):
        print(json.dumps({"key": json.loads(key), "row": table[key]}, sort_keys=True))


if __name__ == "__main__":
    main()
