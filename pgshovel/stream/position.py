"""Where a consumer of a set's stream stands: one opaque value the stream defines and targets store.

A ``StreamPosition`` holds, for every partition of the set's topic (index =
partition number; today always one), a ``PartitionCursor``: the next offset to
read there and the validator's header state after the last message consumed
there (publisher, sequence, epoch; no publisher means none consumed since the
position was made, and the validator then synchronizes on the first Begin). It
also holds the last committed PgQ batch id per source node, global across
partitions, so re-sent batches are recognised. A target stores the position as
one JSON document (``to_document``) in the same atomic step as the data it
applied, and never looks inside; ``from_document`` reads it back, including the
forms earlier releases stored, and names the field of a document that does not
read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pgshovel.errors import StateError
from pgshovel.stream import _fields

__all__ = ["POSITION_VERSION", "PartitionCursor", "StreamPosition"]

#: The version of the document ``to_document`` writes.
POSITION_VERSION = 1


@dataclass(frozen=True)
class PartitionCursor:
    """One partition's place: the next offset to read, and the header of the last message
    consumed there (``publisher`` b"" when none was consumed since the position was made)."""

    next_offset: int
    publisher: bytes = b""
    sequence: int = -1
    epoch: int = 0

    @property
    def consumed(self) -> bool:
        """Whether a message of this partition was consumed since the position was made."""
        return bool(self.publisher)


@dataclass(frozen=True)
class StreamPosition:
    """Every partition's cursor plus the last committed batch id per source node."""

    partitions: tuple[PartitionCursor, ...]
    #: the last committed batch id per source node (16-byte uuid): re-sent batches with an
    #: id at or below it are recognised and skipped
    committed: tuple[tuple[bytes, int], ...] = ()

    @classmethod
    def start(cls, end_offsets: Sequence[int]) -> StreamPosition:
        """The position before the next message of every partition (``end_offsets`` in
        partition order): what the loader notes before it exports its snapshot."""
        return cls(tuple(PartitionCursor(int(offset)) for offset in end_offsets))

    def last_batch(self, node: bytes) -> int | None:
        """The last batch id committed for source ``node``, None if none."""
        for known, batch_id in self.committed:
            if known == node:
                return batch_id
        return None

    def cursor(self, partition: int) -> PartitionCursor:
        return self.partitions[partition]

    @property
    def consumed(self) -> bool:
        """Whether a message was consumed since the position was made (a batch applied)."""
        return any(cursor.consumed for cursor in self.partitions)

    @property
    def messages(self) -> int:
        """The messages before this position, over every partition (a single number for
        metrics: with one partition, the offset of the next message)."""
        return sum(cursor.next_offset for cursor in self.partitions)

    def describe(self) -> str:
        """Short text for logs: ``partition:next offset`` for each partition (``"0:1234"``)."""
        return ",".join(
            f"{number}:{cursor.next_offset}" for number, cursor in enumerate(self.partitions)
        )

    def to_document(self) -> dict[str, Any]:
        """The JSON-ready form targets store."""
        return {
            "version": POSITION_VERSION,
            "partitions": [
                {
                    "next_offset": cursor.next_offset,
                    "publisher": cursor.publisher.hex(),
                    "sequence": cursor.sequence,
                    "epoch": cursor.epoch,
                }
                for cursor in self.partitions
            ],
            "committed": [[node.hex(), batch] for node, batch in self.committed],
        }

    @classmethod
    def from_document(
        cls, document: Any, path: str = "position", start_offset: int | None = None
    ) -> StreamPosition:
        """The position ``document`` describes; a ``StateError`` names the field that does
        not read (``path`` is the document's own name in those errors).

        Also reads the forms of earlier releases: ``{"offset", "publisher", "sequence",
        "epoch", "committed"}`` (the offset of the last message consumed; the committed
        batches as pairs or, from 0.2's state table, as ``committed_nodes`` and
        ``committed_batches``), and None with the ``start_offset`` stored beside it (nothing
        consumed since the loader's snapshot).
        """
        if document is None:
            if start_offset is None:
                raise StateError(f"field {path!r} is missing")
            return cls.start((start_offset,))
        document = _fields.obj(document, path)
        if "partitions" not in document and "offset" in document:
            return _legacy(document, path)
        version = _fields.integer(_fields.field(document, "version", path), f"{path}.version")
        if version > POSITION_VERSION:
            raise StateError(
                f"field {path + '.version'!r}: version {version!r} is newer than this release "
                f"reads ({POSITION_VERSION!r}); run the release that wrote it"
            )
        partitions = _fields.items(
            _fields.field(document, "partitions", path), f"{path}.partitions", _cursor
        )
        if not partitions:
            raise StateError(f"field {path + '.partitions'!r}: expected at least one partition")
        return cls(partitions, _committed(document, path))


def _cursor(value: Any, path: str) -> PartitionCursor:
    document = _fields.obj(value, path)
    return PartitionCursor(
        next_offset=_fields.integer(
            _fields.field(document, "next_offset", path), f"{path}.next_offset", minimum=0
        ),
        publisher=_fields.hexadecimal(
            _fields.field(document, "publisher", path), f"{path}.publisher"
        ),
        sequence=_fields.integer(
            _fields.field(document, "sequence", path), f"{path}.sequence", minimum=-1
        ),
        epoch=_fields.integer(_fields.field(document, "epoch", path), f"{path}.epoch", minimum=0),
    )


def _batch(value: Any, path: str) -> tuple[bytes, int]:
    node, batch = _fields.fixed(value, path, 2)
    return (
        _fields.hexadecimal(node, f"{path}[0]"),
        _fields.integer(batch, f"{path}[1]", minimum=0),
    )


def _committed(document: dict[str, Any], path: str) -> tuple[tuple[bytes, int], ...]:
    return _fields.items(
        _fields.field(document, "committed", path, default=[]), f"{path}.committed", _batch
    )


def _legacy(document: dict[str, Any], path: str) -> StreamPosition:
    """A position stored by pgshovel 0.2 or earlier: the offset of the last message consumed."""
    offset = _fields.integer(_fields.field(document, "offset", path), f"{path}.offset", minimum=0)
    cursor = PartitionCursor(
        next_offset=offset + 1,
        publisher=_fields.hexadecimal(
            _fields.field(document, "publisher", path), f"{path}.publisher"
        ),
        sequence=_fields.integer(
            _fields.field(document, "sequence", path), f"{path}.sequence", minimum=0
        ),
        epoch=_fields.integer(_fields.field(document, "epoch", path), f"{path}.epoch", minimum=0),
    )
    if not cursor.publisher:
        raise StateError(f"field {path + '.publisher'!r}: expected a publisher id, got ''")
    if "committed_nodes" in document or "committed_batches" in document:
        return StreamPosition((cursor,), _committed_columns(document, path))
    return StreamPosition((cursor,), _committed(document, path))


def _committed_columns(document: dict[str, Any], path: str) -> tuple[tuple[bytes, int], ...]:
    """The committed batches as 0.2's state table held them: two arrays, nodes and ids."""
    nodes = _fields.items(
        _fields.field(document, "committed_nodes", path, default=[]),
        f"{path}.committed_nodes",
        _fields.hexadecimal,
    )
    batches = _fields.items(
        _fields.field(document, "committed_batches", path, default=[]),
        f"{path}.committed_batches",
        lambda value, where: _fields.integer(value, where, minimum=0),
    )
    if len(nodes) != len(batches):
        raise StateError(
            f"field {path + '.committed_nodes'!r}: {len(nodes)!r} node(s) but "
            f"{len(batches)!r} batch id(s) in {path + '.committed_batches'!r}; they go in pairs"
        )
    return tuple(zip(nodes, batches, strict=True))
