"""Table topics: the relay's output that publishes every table of a set to a keyed topic of its own.

Bottled Water's and Debezium's model for consumers that know nothing of
pgshovel: ``TableTopicTranslator`` turns the stream's operations into keyed
records (typed JSON or Debezium's envelope), ``TableTopicsOutput`` produces
them through the relay's one producer (``pgshovel.abc.RecordProducer``) and
reads topics back (``pgshovel.abc.TopicReader``), and ``ChunkedSnapshots``
starts each new topic with its table's rows, read in chunks between watermarks
while the stream goes on. Nothing here knows the Kafka writer.
"""

from pgshovel.relay.table_topics._chunk_read import ChunkRead, next_bound, read_table_chunk
from pgshovel.relay.table_topics._debezium import CONNECTOR, Position, Transaction, envelope
from pgshovel.relay.table_topics._output import TableTopicsOutput, snapshot_topic
from pgshovel.relay.table_topics._progress import Progress, parse_progress
from pgshovel.relay.table_topics._settings import ExcludedTable, TableTopics
from pgshovel.relay.table_topics._snapshots import ChunkedSnapshots, SnapshotOutput
from pgshovel.relay.table_topics._translator import Record, TableTopicTranslator, table_topic
from pgshovel.relay.table_topics._window import (
    Flight,
    WindowTracker,
    relay_attempt_prefix,
    surviving,
)

__all__ = [
    "CONNECTOR",
    "ChunkRead",
    "ChunkedSnapshots",
    "ExcludedTable",
    "Flight",
    "Position",
    "Progress",
    "Record",
    "SnapshotOutput",
    "TableTopicTranslator",
    "TableTopics",
    "TableTopicsOutput",
    "Transaction",
    "WindowTracker",
    "envelope",
    "next_bound",
    "parse_progress",
    "read_table_chunk",
    "relay_attempt_prefix",
    "snapshot_topic",
    "surviving",
    "table_topic",
]
