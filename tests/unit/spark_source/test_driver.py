"""The driver's planner over a scripted topic: cuts on Commits, budgets, reading on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.spark_source.driver import StreamPlanner
from pgshovel.spark_source.offsets import offset_document
from pgshovel.spark_source.options import SourceOptions
from pgshovel.stream.position import StreamPosition
from tests.unit.spark_source.test_offsets import _stream


class ScriptedTopic:
    """One partition holding ``messages``, of which the first ``visible`` are published."""

    def __init__(self, messages: list[stream_pb2.Message], visible: int) -> None:
        self.messages = messages
        self.visible = visible
        self.assigned: list[dict[int, int]] = []
        self._next = 0

    def partitions(self) -> int:
        return 1

    def watermarks(self, partition: int) -> tuple[int, int]:
        return 0, self.visible

    def assign(self, offsets: Mapping[int, int]) -> None:
        self.assigned.append(dict(offsets))
        self._next = offsets[0]

    def read_records(self, max_messages: int, timeout: float) -> list[tuple[int, int, Any]]:
        end = min(self.visible, self._next + max(1, min(max_messages, 3)))
        records = [(0, offset, self.messages[offset]) for offset in range(self._next, end)]
        self._next = end
        return records

    def close(self) -> None:
        pass


def _planner(topic: ScriptedTopic) -> StreamPlanner:
    planner = StreamPlanner(SourceOptions("k:1", "c.s"))
    planner._reader = topic  # type: ignore[assignment]
    planner._partitions = 1
    return planner


def test_latest_stands_on_the_last_commit_published_and_reads_on_from_there() -> None:
    # Batches end at offsets 3 (two mutations), 6 (rolled back), 9 and 14.
    topic = ScriptedTopic(_stream(), visible=12)
    planner = _planner(topic)
    start = planner.start_position("earliest")
    first = planner.latest(start)
    assert first.partitions[0].next_offset == 10
    topic.visible = 15
    second = planner.latest(first)
    assert second.partitions[0].next_offset == 15
    # The open batch's first messages were not read again: one assignment, at the start.
    assert topic.assigned == [{0: 0}]
    assert planner.latest(second) == second


def test_a_budget_cuts_at_the_first_batch_end_past_it() -> None:
    topic = ScriptedTopic(_stream(), visible=15)
    planner = _planner(topic)
    offsets = []
    position = planner.start_position("earliest")
    for _ in range(4):
        position = planner.latest(position, max_mutations=1)
        offsets.append(position.partitions[0].next_offset)
    assert offsets == [4, 10, 15, 15]


def test_an_offset_of_another_partition_count_is_refused() -> None:
    planner = _planner(ScriptedTopic(_stream(), visible=15))
    two = offset_document("c.s", StreamPosition.start((0, 0)))
    with pytest.raises(StreamError, match="names 2 partition"):
        planner.start_position(two)
