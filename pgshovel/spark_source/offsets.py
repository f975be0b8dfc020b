"""Spark offsets of a set's stream: position documents at batch boundaries, and the ranges between.

An offset is ``{"topic": ..., "position": StreamPosition document}`` — per
partition the next offset to read and the validator's header state there, plus
the last committed batch per source node — taken only right after a batch's
Commit (or where a query starts, before anything was read). So the messages
between two offsets are whole source transactions, and a task that validates
them from the start offset's state sees exactly the batches the driver saw.
``plan_ranges`` cuts a micro-batch (start, end) into one ``StreamRange`` per
partition, JSON-ready for Spark's ``InputPartition``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pgshovel.errors import StateError, StreamError
from pgshovel.stream.position import PartitionCursor, StreamPosition

__all__ = ["StreamRange", "offset_document", "plan_ranges", "position_of"]


def offset_document(topic: str, position: StreamPosition) -> dict[str, Any]:
    """The Spark offset of ``position`` in ``topic``."""
    return {"topic": topic, "position": position.to_document()}


def position_of(document: Mapping[str, Any], topic: str) -> StreamPosition:
    """The position an offset document holds; an error if it is of another topic or damaged
    (a checkpoint of another query, an option pasted from elsewhere)."""
    if not isinstance(document, Mapping) or "position" not in document:
        raise StateError(
            f"offset {document!r} is not a pgshovel offset (a JSON object with 'topic' and "
            "'position'); start the query from 'earliest' or 'latest', or with a new checkpoint"
        )
    found = document.get("topic")
    if found != topic:
        raise StateError(
            f"offset of topic {found!r} given to a source reading topic {topic!r}: the "
            "checkpoint or option belongs to another set; use a new checkpoint location"
        )
    return StreamPosition.from_document(document["position"], "offset.position")


@dataclass(frozen=True)
class StreamRange:
    """One partition's messages ``[start cursor's next offset, end_offset)`` of a micro-batch,
    and what a task needs to read and validate them (JSON-ready fields only)."""

    bootstrap_servers: str
    properties: tuple[tuple[str, str], ...]
    topic: str
    partition: int
    #: the start offset's position document restricted to this partition (validator state)
    start: dict[str, Any]
    end_offset: int
    #: how many partitions the topic has (a task yields a change read in several once)
    partitions: int = 1

    @property
    def start_offset(self) -> int:
        return int(self.start["partitions"][0]["next_offset"])

    @property
    def empty(self) -> bool:
        return self.start_offset >= self.end_offset

    def kafka_properties(self) -> dict[str, str]:
        return dict(self.properties)

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["properties"] = [list(pair) for pair in self.properties]
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> StreamRange:
        return cls(
            bootstrap_servers=str(document["bootstrap_servers"]),
            properties=tuple((str(k), str(v)) for k, v in document["properties"]),
            topic=str(document["topic"]),
            partition=int(document["partition"]),
            start=dict(document["start"]),
            end_offset=int(document["end_offset"]),
            partitions=int(document["partitions"]),
        )

    def start_position(self) -> StreamPosition:
        """The position a task's validator starts from (this partition alone)."""
        return StreamPosition.from_document(self.start, "range.start")


def plan_ranges(
    start: StreamPosition,
    end: StreamPosition,
    topic: str,
    bootstrap_servers: str,
    properties: tuple[tuple[str, str], ...] = (),
) -> list[StreamRange]:
    """One range per partition between two positions of the same topic (empty partitions
    left out); an error if ``end`` lies before ``start`` anywhere."""
    if len(start.partitions) != len(end.partitions):
        raise StreamError(
            f"offsets of topic {topic!r} with {len(start.partitions)!r} and "
            f"{len(end.partitions)!r} partitions: the topic was recreated; use a new "
            "checkpoint location"
        )
    ranges = []
    for number, (first, last) in enumerate(zip(start.partitions, end.partitions, strict=True)):
        if last.next_offset < first.next_offset:
            raise StreamError(
                f"the end offset {last.next_offset!r} of partition {number!r} of topic "
                f"{topic!r} lies before its start offset {first.next_offset!r}: the offsets "
                "are of another stream; use a new checkpoint location"
            )
        if last.next_offset == first.next_offset:
            continue
        ranges.append(
            StreamRange(
                bootstrap_servers=bootstrap_servers,
                properties=properties,
                topic=topic,
                partition=number,
                start=_alone(first, start.committed).to_document(),
                end_offset=last.next_offset,
                partitions=len(start.partitions),
            )
        )
    return ranges


def _alone(cursor: PartitionCursor, committed: tuple[tuple[bytes, int], ...]) -> StreamPosition:
    return StreamPosition((cursor,), committed)
