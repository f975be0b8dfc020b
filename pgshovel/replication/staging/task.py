"""One staging task: read a run of one partition's messages, reduce them, stage the result.

The driver validated the stream's framing from the messages' heads and hands
each task the exact messages to take — offset, the batch's ordinal in the
micro-batch, and the header it saw there (publisher, sequence) — so a task
never re-decides what is committed: it reads its offsets with a consumer of
its own, checks every message it takes is the one the driver planned (a topic
recreated or rewritten under the worker is an error, never a silent mix), and
hands the decoded ``MutationBatch``es to ``reduce_messages`` and the result to
the target's ``StageSink``. Runs inside a Spark task (everything here pickles);
a task Spark retries stages again under its attempt's own names.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pgshovel.errors import BrokerUnavailable, StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.staging.reduce import StagedTable, reduce_messages
from pgshovel.source import TableShape

__all__ = ["StageSink", "StageTask", "Take", "run_stage_task"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Take:
    """A message the task must take: where, which batch, and the header the driver saw."""

    offset: int
    ordinal: int
    batch_id: int
    publisher: bytes
    sequence: int


class StageSink(Protocol):
    """Where a task stages its tables (pickles into tasks); returns what it staged."""

    def stage(
        self, task: int, attempt: int, staged: dict[tuple[str, str], StagedTable]
    ) -> list[Any]: ...


@dataclass(frozen=True)
class StageTask:
    """A run of one partition for one Spark task."""

    number: int
    consumer: Mapping[str, str]
    topic: str
    partition: int
    takes: tuple[Take, ...]
    shapes: tuple[TableShape, ...]
    sink: StageSink
    #: how long one wait for the next message may last before the read is a broker fault
    timeout: float = 60.0


def _read(task: StageTask) -> Iterator[tuple[int, stream_pb2.MutationBatch]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(dict(task.consumer))
    try:
        wanted = {take.offset: take for take in task.takes}
        last = task.takes[-1].offset
        consumer.assign([TopicPartition(task.topic, task.partition, task.takes[0].offset)])
        while wanted:
            record = consumer.poll(task.timeout)
            if record is None:
                raise BrokerUnavailable(
                    f"staging task {task.number}: no message of topic {task.topic!r} partition "
                    f"{task.partition!r} within {task.timeout}s while {len(wanted)!r} planned "
                    "one(s) are still to read"
                )
            if record.error() is not None:
                raise BrokerUnavailable(
                    f"staging task {task.number}: reading topic {task.topic!r} partition "
                    f"{task.partition!r} failed: {record.error()}"
                )
            offset = record.offset()
            if offset is None:
                continue
            take = wanted.pop(offset, None)
            if take is not None:
                yield take.ordinal, _checked(task, take, record.value() or b"")
            elif offset > last:
                break
        if wanted:
            raise StreamError(
                f"staging task {task.number}: topic {task.topic!r} partition {task.partition!r} "
                f"no longer holds offsets {sorted(wanted)!r} the micro-batch was planned with; "
                "the topic was recreated or rewritten: reload the target from a fresh snapshot"
            )
    finally:
        consumer.close()


def _checked(task: StageTask, take: Take, value: bytes) -> stream_pb2.MutationBatch:
    message = stream_pb2.Message.FromString(value)
    operation = message.operation
    if (
        message.header.publisher != take.publisher
        or message.header.sequence != take.sequence
        or operation.batch.id != take.batch_id
        or operation.WhichOneof("operation") != "rows"
    ):
        raise StreamError(
            f"staging task {task.number}: the message at offset {take.offset!r} of topic "
            f"{task.topic!r} partition {task.partition!r} is not the one the micro-batch was "
            f"planned with (batch {take.batch_id!r}, sequence {take.sequence!r}); the topic "
            "was rewritten under the worker: reload the target from a fresh snapshot"
        )
    return operation.rows


def run_stage_task(task: StageTask) -> list[Any]:
    """Read, reduce and stage one task's messages; what the sink staged."""
    attempt = 0
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None:
            attempt = context.attemptNumber()
    except ImportError:  # pragma: no cover - outside Spark (tests call it directly)
        pass
    shapes = {shape.identity: shape for shape in task.shapes}
    details = bool(getattr(task.sink, "details", False))
    copy = bool(getattr(task.sink, "copy", False))
    staged = reduce_messages(_read(task), shapes, details=details, copy=copy)
    if details:
        batch_ids = {take.ordinal: take.batch_id for take in task.takes}
        for table in staged.values():
            table.batch_ids = batch_ids
    return task.sink.stage(task.number, attempt, staged)
