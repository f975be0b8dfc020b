"""A user's pipeline on the pgshovel source: readStream, foreachBatch applying to a PostgreSQL.

Run as a script (``python _pipeline.py BOOTSTRAP PROPERTIES TOPIC CHECKPOINT TARGET``)
it streams the set topic with Spark's checkpoint in CHECKPOINT and applies every
micro-batch to the ``items`` table of the TARGET database in one transaction
that also records the micro-batch (``spark_batches``: its Spark batch id and the
mutations of each source transaction it held). A micro-batch Spark runs again
after a crash (its commit log not written) finds its row there and is skipped:
the usual idempotent ``foreachBatch``. It runs until killed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import psycopg2
from psycopg2 import sql

from pgshovel.replication.config import SparkSettings
from pgshovel.replication.spark import spark_session
from pgshovel.spark_source import register

TARGET_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS items (id integer PRIMARY KEY, value integer NOT NULL, note text);"
    "CREATE TABLE IF NOT EXISTS spark_batches (batch bigint PRIMARY KEY, transactions jsonb)"
)


def _apply(cursor: Any, row: Any) -> None:
    operation = row["operation"]
    table = sql.Identifier(row["table"])
    if operation == "TRUNCATE":
        cursor.execute(sql.SQL("TRUNCATE {}").format(table))
        return
    if operation in ("UPDATE", "DELETE"):
        old = json.loads(row["old"])
        cursor.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(table), (old["id"],))
    if operation in ("INSERT", "UPDATE"):
        new = json.loads(row["new"])
        columns = list(new)
        cursor.execute(
            sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                table,
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            ),
            [new[column] for column in columns],
        )


def main(bootstrap: str, properties: str, topic: str, checkpoint: str, target: str) -> None:
    spark = spark_session(
        SparkSettings(
            master="local[2]",
            app_name="pgshovel-source-pipeline",
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        )
    )
    register(spark)
    connection = psycopg2.connect(target)
    with connection, connection.cursor() as cursor:
        cursor.execute(TARGET_SCHEMA)

    def apply(frame: Any, batch: int) -> None:
        rows = frame.orderBy("batch_id", "ordinal").collect()
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM spark_batches WHERE batch = %s", (batch,))
            if cursor.fetchone() is not None:
                return
            for row in rows:
                _apply(cursor, row)
            transactions = Counter(str(row["transaction"]) for row in rows)
            cursor.execute(
                "INSERT INTO spark_batches VALUES (%s, %s)", (batch, json.dumps(transactions))
            )
        print(f"applied micro-batch {batch}: {len(rows)} mutations", file=sys.stderr, flush=True)

    reader = (
        spark.readStream.format("pgshovel")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("maxMutationsPerTrigger", "300")
    )
    for key, value in json.loads(properties).items():
        reader = reader.option(f"kafka.{key}", value)
    query = (
        reader.load()
        .writeStream.foreachBatch(apply)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
