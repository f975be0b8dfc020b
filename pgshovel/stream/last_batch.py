"""The last batch a stream holds whole: read backwards from the topic's end.

After a failover the relay checks that its (new) source knows the batch the
stream committed last (``pgshovel.relay.failover``). The topic is read in
windows from the end backwards, keeping nothing but what is looked for: first
the last Commit, then the Begin of the same batch before it (the latest one, as
a batch may have been sent more than once). A partitioned set topic frames every
batch in every partition: its partition 0 is read.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.reader import KafkaReader

Numbered = tuple[int, stream_pb2.Message]
Identity = tuple[bytes, int]


def last_commit(messages: Sequence[Numbered]) -> Numbered | None:
    """The last Commit among ``messages`` (offset order)."""
    for offset, message in reversed(messages):
        if message.operation.HasField("commit"):
            return offset, message
    return None


def begin_of(messages: Sequence[Numbered], batch: Identity, before: int) -> Numbered | None:
    """The last Begin of ``batch`` (node, id) at an offset below ``before``."""
    for offset, message in reversed(messages):
        operation = message.operation
        if (
            offset < before
            and operation.HasField("begin")
            and (operation.batch.node, operation.batch.id) == batch
        ):
            return offset, message
    return None


def _read_range(reader: KafkaReader, start: int, end: int) -> list[Numbered]:
    # Partition 0 of a partitioned set topic carries every batch's Begin and Commit too.
    reader.seek(start, partitioned=True)
    messages: list[Numbered] = []
    while not messages or messages[-1][0] < end - 1:
        read = reader.read(end - start, reader.timeout)
        if not read:
            raise StreamError(
                f"topic {reader.topic!r}: offsets {start!r} to {end - 1!r} could not be read "
                f"back within {reader.timeout}s"
            )
        messages.extend(pair for pair in read if pair[0] < end)
    return messages


def last_committed_begin(reader: KafkaReader, window: int = 2000) -> stream_pb2.Message | None:
    """The Begin of the last batch the topic holds with its Commit (None: no such batch)."""
    low, end = reader.watermarks()
    commit: Numbered | None = None
    while end > low:
        start = max(low, end - window)
        messages = _read_range(reader, start, end)
        if commit is None:
            commit = last_commit(messages)
        if commit is not None:
            batch = commit[1].operation.batch
            found = begin_of(messages, (batch.node, batch.id), commit[0])
            if found is not None:
                return found[1]
        end = start
    return None
