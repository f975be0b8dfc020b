"""The pyspark Data Source ``pgshovel``: a set's stream for ``spark.read`` and ``spark.readStream``.

``PgshovelDataSource`` (``name() == "pgshovel"``) has the schema of
``pgshovel.spark_source.records`` and two readers. The stream reader's offsets
are position documents at batch boundaries (``pgshovel.spark_source.offsets``):
``initialOffset`` is the ``startingPosition``, ``latestOffset`` validates on the
driver up to the last complete batch (``StreamPlanner``), ``partitions`` gives a
``RangePartition`` per Kafka partition range and ``read`` runs on an executor
(``read_range``). So every micro-batch holds whole source transactions, in
commit order. The batch reader plans the same way once, from
``startingPosition`` to ``endingPosition``. Importing this module needs pyspark
(the ``spark`` extra).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from pgshovel.spark_source.driver import StreamPlanner
from pgshovel.spark_source.offsets import StreamRange, offset_document, plan_ranges, position_of
from pgshovel.spark_source.options import SourceOptions
from pgshovel.spark_source.records import schema_ddl
from pgshovel.spark_source.task import read_range

__all__ = ["PgshovelDataSource", "RangePartition"]

logger = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Kafka partition's range of a micro-batch (a ``StreamRange`` as JSON)."""

    def __init__(self, stream_range: StreamRange) -> None:
        super().__init__(stream_range.to_json())

    def stream_range(self) -> StreamRange:
        return StreamRange.from_json(self.value)


def _partitions(options: SourceOptions, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
    topic = options.topic
    ranges = plan_ranges(
        position_of(start, topic),
        position_of(end, topic),
        topic,
        options.bootstrap_servers,
        options.properties,
    )
    return [RangePartition(stream_range) for stream_range in ranges]


def _read(partition: Any) -> Iterator[tuple[Any, ...]]:
    if not isinstance(partition, RangePartition):  # pragma: no cover - Spark passes ours
        raise TypeError(f"not a pgshovel partition: {partition!r}")
    return read_range(partition.stream_range())


class PgshovelStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("pgshovel")``: offsets at batch boundaries only."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._planner = StreamPlanner(options)

    def initialOffset(self) -> dict[str, Any]:
        return self._planner.start_offset(self.options.starting)

    def getDefaultReadLimit(self) -> ReadLimit:
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        if self.options.max_mutations is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_mutations)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        topic = self.options.topic
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self._planner.latest(position_of(start, topic), budget)
        return offset_document(topic, end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[Any]:
        return _partitions(self.options, start, end)

    def read(self, partition: Any) -> Iterator[tuple[Any, ...]]:
        return _read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Nothing to release: the offsets live in Spark's checkpoint, not in Kafka.
        logger.debug("micro-batch up to %r done", end)

    def stop(self) -> None:
        self._planner.close()


class PgshovelBatchReader(DataSourceReader):
    """``spark.read.format("pgshovel")``: the batches between two positions, planned once."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[Any]:
        planner = StreamPlanner(self.options)
        try:
            start = planner.start_offset(self.options.starting)
            if isinstance(self.options.ending, dict):
                end = self.options.ending
            else:
                topic = self.options.topic
                end = offset_document(topic, planner.latest(position_of(start, topic)))
        finally:
            planner.close()
        ranges = _partitions(self.options, start, end)
        # Spark needs at least one partition: an empty range reads nothing.
        return ranges or [RangePartition(_empty_range(self.options, start))]

    def read(self, partition: Any) -> Iterator[tuple[Any, ...]]:
        return _read(partition)


def _empty_range(options: SourceOptions, start: dict[str, Any]) -> StreamRange:
    position = position_of(start, options.topic)
    document = position.to_document()
    return StreamRange(
        options.bootstrap_servers,
        options.properties,
        options.topic,
        0,
        document,
        position.partitions[0].next_offset,
    )


class PgshovelDataSource(DataSource):
    """The ``pgshovel`` format: a replication set's stream (see the module documentation)."""

    @classmethod
    def name(cls) -> str:
        return "pgshovel"

    def schema(self) -> str:
        return schema_ddl()

    def reader(self, schema: StructType) -> PgshovelBatchReader:
        return PgshovelBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> PgshovelStreamReader:
        return PgshovelStreamReader(SourceOptions.parse(self.options))
