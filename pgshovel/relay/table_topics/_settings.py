"""The Kafka writer's ``table_topics:`` section of relay.yml, validated when read."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pgshovel import settings

__all__ = ["ExcludedTable", "TableTopics"]


class ExcludedTable(settings.Settings):
    """A table left out of the table topics (its changes stay in the set topic)."""

    name: settings.NonEmptyText
    schema_: Annotated[str, Field(min_length=1, alias="schema")] = "public"


class TableTopics(settings.Settings):
    """The Kafka writer's ``table_topics:`` section: one keyed, compacted topic per table."""

    #: topic names are ``[prefix.][schema.]table`` (schema left out for ``public``);
    #: unset: the set's topic name (``<cluster>.<set>``); "": no prefix
    prefix: str | None = None
    #: ``json``: the row as typed JSON, a tombstone for a delete; ``debezium``: Debezium's envelope
    format: Literal["json", "debezium"] = "json"
    #: Debezium's ``source.db``; "" (the default): the source database's name, as
    #: ``current_database()`` answers the relay
    database: str = ""
    #: a new table topic starts with the table's rows (``op: r``), read in chunks between
    #: watermarks while the stream goes on (``pgshovel.relay.table_topics._snapshots``)
    snapshot: bool = True
    #: rows per snapshot chunk (about: the chunk ends at the key this many rows on)
    snapshot_chunk_rows: int = Field(10_000, ge=1)
    #: ``format: debezium`` only: also publish Debezium's transaction-metadata topic
    #: ``<prefix>.transaction`` (BEGIN/END records with per-table event counts)
    transaction_topic: bool = False

    @model_validator(mode="after")
    def _transaction_topic_needs_debezium(self) -> TableTopics:
        if self.transaction_topic and self.format != "debezium":
            raise ValueError("transaction_topic needs format: debezium")
        return self

    #: create missing topics compacted through the admin API (Kafka 0.10.1 or later)
    create: bool = True
    #: partitions and replication factor of the topics the relay creates
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(1, ge=1)
    #: tables that get no table topic (``{schema, name}``; their changes stay in the set
    #: topic): how two tables whose topics would share a name are told apart
    exclude: tuple[ExcludedTable, ...] = ()
