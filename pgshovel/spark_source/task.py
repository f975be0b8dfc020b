"""What a Spark task runs: read one partition's range of a micro-batch, validate it, yield its rows.

The task consumes exactly ``[start, end)`` of its partition with confluent-kafka
(``PartitionsReader``: no consumer group offsets, an offset the topic no longer
holds is an error), feeds every message to a ``StreamValidator`` started from the
range's start state — the same checks as the worker: framing, publisher
sequences and epochs, rollbacks and re-sent batches dropped, and each Begin
framed for this partition of this many — and yields one row per mutation of
each batch that commits (``pgshovel.spark_source.records``; a change the relay
wrote to several partitions only from its first). The range must end right
after a Commit: the driver only hands out such offsets, so a range whose last
batch does not commit there means the topic changed under the query, and is an
error rather than a partial batch. (The driver checked that every batch of the
micro-batch committed in every partition with counts that add up.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pgshovel.errors import StreamError
from pgshovel.spark_source.kafka import PartitionsReader
from pgshovel.spark_source.offsets import StreamRange
from pgshovel.spark_source.records import batch_records
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.validation import StreamValidator

__all__ = ["read_range"]

logger = logging.getLogger(__name__)

#: messages per read from Kafka
_CHUNK = 2000
#: how long a read waits for its first message (the messages exist: they are below the end)
_WAIT = 5.0
#: reads in a row that may come back empty before the task gives up
_EMPTY_READS = 24


def read_range(task_range: StreamRange) -> Iterator[tuple[Any, ...]]:
    """The rows of every batch committed in ``task_range`` (see the module documentation)."""
    if task_range.empty:
        return
    start = task_range.start_position()
    validator = StreamValidator(start)
    reader = PartitionsReader(
        task_range.bootstrap_servers, task_range.topic, task_range.kafka_properties()
    )
    end, partition = task_range.end_offset, task_range.partition
    last_commit = start.partitions[0].next_offset
    try:
        reader.assign({partition: task_range.start_offset})
        next_offset, empty = task_range.start_offset, 0
        while next_offset < end:
            records = reader.read_records(min(_CHUNK, end - next_offset), _WAIT)
            if not records:
                empty += 1
                if empty >= _EMPTY_READS:
                    raise StreamError(
                        f"topic {task_range.topic!r} partition {partition!r} gave no message at "
                        f"offset {next_offset!r} for {_EMPTY_READS * _WAIT:.0f} s, the "
                        f"micro-batch reads to offset {end!r}; check the brokers"
                    )
                continue
            empty = 0
            for _partition, offset, message in records:
                if offset >= end:
                    break
                next_offset = offset + 1
                batch = validator.feed(offset, message)
                if batch is None:
                    continue
                _check_framing(batch, task_range)
                last_commit = batch.position.partitions[0].next_offset
                yield from batch_records(batch, partition, task_range.partitions)
    finally:
        reader.close()
    if last_commit != end:
        raise StreamError(
            f"topic {task_range.topic!r} partition {partition!r}: the micro-batch ends at "
            f"offset {end!r}, the last batch in it committed at {last_commit - 1!r}: the "
            "topic's messages differ from those the query planned with (the topic was "
            "recreated?); restart the query with a new checkpoint location"
        )


def _check_framing(batch: CommittedBatch, task_range: StreamRange) -> None:
    begin = batch.begin
    if (begin.partitions or 1) != task_range.partitions or begin.partition != task_range.partition:
        raise StreamError(
            f"batch {batch.batch_id!r} was framed as partition {begin.partition!r} of "
            f"{begin.partitions or 1!r} and read from partition {task_range.partition!r} of "
            f"topic {task_range.topic!r} with {task_range.partitions!r}: the topic's partition "
            "count does not match the relay's `partitions` setting"
        )
