"""The stream: protocol codec, publisher framing, validating reader, snapshot handoff."""

from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.handoff import HandoffFilter, Snapshot, is_visible, parse_txid_snapshot
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.validation import StreamValidator

__all__ = [
    "CommittedBatch",
    "HandoffFilter",
    "PartitionCursor",
    "Publisher",
    "Snapshot",
    "StreamPosition",
    "StreamValidator",
    "is_visible",
    "parse_txid_snapshot",
]
