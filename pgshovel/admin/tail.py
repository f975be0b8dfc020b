"""``set tail``: read a set's topic, validate it, print committed mutations as JSON lines.

By default it prints what the topic holds now and stops; ``--follow`` keeps
waiting for new batches; ``--latest`` starts at the topic's end (with
``--follow``: only what arrives from now on). Starting anywhere but a Begin, the
validator skips to the first whole batch, so what is printed is always
committed and complete. A partitioned set topic (``partitions: N`` in
relay.yml) is read in all its partitions and joined as the worker joins it
(``pgshovel.stream.partitions``): each batch is printed once every partition
committed it, its changes in event id order; ``--offset`` names an offset of
a one-partition topic and is refused there. ``--format pgshovel`` prints pgshovel's records
(``pgshovel.stream.jsonlines``); ``--format debezium`` prints each change as
the Debezium envelope a table topic would carry (``pgshovel.relay.table_topics``),
a key change as a ``d`` then a ``c`` event and a TRUNCATE as Debezium's ``t``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Literal

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.table_topics import TableTopicTranslator
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.jsonlines import json_lines
from pgshovel.stream.partitions import PartitionJoin
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.reader import KafkaReader

READ_BATCH = 5000

TailFormat = Literal["pgshovel", "debezium"]


def debezium_lines(batch: CommittedBatch, translator: TableTopicTranslator) -> Iterator[str]:
    """The batch's changes as Debezium envelopes, one per line (tombstones left out)."""
    translator.begin(batch.batch_id)
    for mutation in batch.mutations:
        if mutation.operation == stream_pb2.Mutation.TRUNCATE:
            yield translator.truncate_event(mutation).decode("utf-8")
            continue
        for record in translator.translate(mutation):
            if record.value is not None:
                yield record.value.decode("utf-8")


def _start(
    reader: KafkaReader, topic: str, offset: int | None, latest: bool
) -> tuple[StreamPosition, list[int]]:
    """Assign every partition of the topic at its start; the position it starts from and
    each partition's end now."""
    count = max(reader.partitions(), 1)
    if count > 1 and offset is not None:
        raise ConfigurationError(
            f"--offset {offset!r}: topic {topic!r} has {count!r} partitions (a partitioned "
            "set topic); an offset names a message of one partition: leave --offset out "
            "(from the start) or use --latest"
        )
    ends = [reader.watermarks(partition) for partition in range(count)]
    if count > 1:
        starts = tuple(high if latest else low for low, high in ends)
    else:
        low, high = ends[0]
        starts = (high if latest else low if offset is None else offset,)
    position = StreamPosition.start(starts)
    if count > 1:
        reader.resume(position)
    else:
        reader.seek(starts[0])
    return position, [high for _low, high in ends]


def tail(
    bootstrap_servers: str,
    topic: str,
    properties: Mapping[str, str],
    emit: Callable[[str], None],
    offset: int | None = None,
    follow: bool = False,
    limit: int | None = None,
    poll: float = 0.5,
    format: TailFormat = "pgshovel",
    latest: bool = False,
) -> int:
    """Print the committed mutations of ``topic``; returns how many lines were printed."""
    reader = KafkaReader(bootstrap_servers, topic, properties)
    translator = TableTopicTranslator("", "debezium", name=topic)
    lines: Callable[[CommittedBatch], Iterator[str]] = (
        json_lines if format == "pgshovel" else lambda batch: debezium_lines(batch, translator)
    )
    printed = 0
    try:
        position, highs = _start(reader, topic, offset, latest)
        join = PartitionJoin(position)
        #: the next offset to read of each partition (``highs``: the ends it must reach)
        reading = [cursor.next_offset for cursor in position.partitions]
        while True:
            if not follow and all(at >= end for at, end in zip(reading, highs, strict=True)):
                break
            records = reader.read_records(READ_BATCH, poll)
            if not records:
                if not follow:
                    # Nothing arrived: the ends may have moved (or not); check again.
                    highs = [reader.watermarks(partition)[1] for partition in range(len(highs))]
                    if all(at >= end for at, end in zip(reading, highs, strict=True)):
                        break
                    time.sleep(poll)
                continue
            for partition, at, _message in records:
                reading[partition] = max(reading[partition], at + 1)
            for batch in join.validate(records):
                for line in lines(batch):
                    emit(line)
                    printed += 1
                    if limit is not None and printed >= limit:
                        return printed
    finally:
        reader.close()
    return printed
