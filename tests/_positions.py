"""Stream positions for tests: the position after a given message of a one-partition topic."""

from __future__ import annotations

from pgshovel.stream.position import PartitionCursor, StreamPosition


def after(
    offset: int,
    publisher: bytes = b"p" * 16,
    sequence: int = 0,
    epoch: int = 1,
    committed: tuple[tuple[bytes, int], ...] = (),
) -> StreamPosition:
    """The position after the message at ``offset`` (partition 0), written by ``publisher``
    with ``sequence`` in ``epoch``."""
    return StreamPosition((PartitionCursor(offset + 1, publisher, sequence, epoch),), committed)


def last_offset(position: StreamPosition) -> int:
    """The offset of the last message consumed in partition 0 (-1: none since the start)."""
    return position.cursor(0).next_offset - 1
