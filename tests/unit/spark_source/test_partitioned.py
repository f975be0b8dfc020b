"""A partitioned set topic through the source: a range per partition, each change yielded once."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pgshovel.spark_source.frontier import Frontier
from pgshovel.spark_source.offsets import plan_ranges
from pgshovel.spark_source.records import COLUMNS, batch_records
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.validation import StreamValidator
from tests.unit.stream.test_partitions import _join, _stream

EVENT_ID = [name for name, _ in COLUMNS].index("event_id")


def test_the_tasks_of_a_micro_batch_yield_the_joined_stream_each_change_once() -> None:
    records = _stream(partitions=4, batches=3)
    joined = _join(records)
    frontier = Frontier(StreamPosition.start((0, 0, 0, 0)))
    frontier.add(records)
    first, _ = frontier.cut(1)
    assert first == joined[0].position  # a cut stands on a batch every partition committed
    end, _ = frontier.cut()
    assert end == joined[-1].position
    ranges = plan_ranges(first, end, "c.s", "k:1")
    assert [task.partition for task in ranges] == [0, 1, 2, 3]
    rows: list[tuple[Any, ...]] = []
    for task in ranges:
        validator = StreamValidator(task.start_position())
        mine = [
            (offset, message)
            for partition, offset, message in records
            if partition == task.partition and task.start_offset <= offset < task.end_offset
        ]
        for batch in validator.validate(mine):
            rows += batch_records(batch, task.partition, task.partitions)
    yielded = Counter((row[1], row[EVENT_ID]) for row in rows)
    expected = Counter(
        (batch.batch_id, mutation.id) for batch in joined[1:] for mutation in batch.mutations
    )
    # Key changes between partitions travel twice, TRUNCATE-free here: each is yielded once.
    assert yielded == expected and max(yielded.values()) == 1
    assert {row[-1] for row in rows} == {0, 1, 2, 3}
