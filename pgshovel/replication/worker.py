"""The replication worker: snapshot if needed, then apply the stream micro-batch by micro-batch.

Order of effects, which crash safety rests on:

1. the target returns its stored state (taking a lock so one worker runs per set);
2. with no state, or a snapshot load that never finished: note the topic's end
   offset, export the source snapshot, record phase ``snapshot`` (the target
   empties the set's tables), copy every range, then record phase
   ``streaming`` with that offset and snapshot;
3. for each micro-batch: drop mutations the snapshot already holds (handoff),
   then apply the batches and store the position of the last Commit in the
   same target transaction. Nothing is acknowledged anywhere else: the Kafka
   position lives only in the target.

``should_stop`` is checked between micro-batches, so a stop request ends the
worker after the current micro-batch is applied.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from pgshovel.protocol import configuration_pb2
from pgshovel.replication import catalog, sessions
from pgshovel.replication.abc import TableLoadReport
from pgshovel.replication.config import ReplicationConfiguration
from pgshovel.replication.model import TableShape, WorkerState
from pgshovel.stream.handoff import HandoffFilter, parse_txid_snapshot

logger = logging.getLogger(__name__)


def read_table_shapes(
    set_configuration: configuration_pb2.ReplicationSetConfiguration,
) -> list[TableShape]:
    """The set's tables as the source catalog describes them."""
    connection = sessions.connect(set_configuration.database.dsn)
    try:
        return catalog.set_shapes(connection, set_configuration)
    finally:
        connection.close()


class Worker:
    """Replicates one set of one cluster with the configured loader, stream and target."""

    def __init__(
        self,
        cluster: str,
        set_name: str,
        set_configuration: configuration_pb2.ReplicationSetConfiguration,
        configuration: ReplicationConfiguration,
        spark: Any,
    ) -> None:
        self.cluster = cluster
        self.set_name = set_name
        self.set_configuration = set_configuration
        self.configuration = configuration
        self.spark = spark
        self.load_reports: list[TableLoadReport] = []

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> WorkerState:
        """Load if needed and stream until ``should_stop()``; return the last stored state."""
        tables = read_table_shapes(self.set_configuration)
        stream = self.configuration.stream
        target = self.configuration.target
        stream.open(f"{self.cluster}.{self.set_name}")
        try:
            state = target.open(self.cluster, self.set_name, tables)
            if state is None or state.phase == "snapshot":
                if state is not None:
                    logger.warning(
                        "the previous snapshot load did not finish; emptying the set's tables "
                        "and loading again"
                    )
                state = self.load(tables)
            else:
                logger.info("resuming the stream at offset %d", state.next_offset)
            return self.stream(state, should_stop)
        finally:
            stream.close()
            target.close()

    def load(self, tables: Sequence[TableShape]) -> WorkerState:
        """Copy a consistent snapshot of every table; return the streaming state after it."""
        target = self.configuration.target
        start_offset = self.configuration.stream.end_offset()
        exported: list[str] = []

        def on_exported(txid_snapshot: str) -> None:
            exported.append(txid_snapshot)
            target.begin_snapshot(WorkerState("snapshot", txid_snapshot, start_offset))

        self.load_reports = self.configuration.loader.load(
            self.spark,
            self.set_configuration.database.dsn,
            tables,
            target.snapshot_sink(),
            on_exported,
        )
        state = WorkerState("streaming", exported[0], start_offset)
        target.finish_snapshot(state)
        logger.info(
            "snapshot loaded: %d rows in %d table(s); streaming from offset %d",
            sum(report.rows for report in self.load_reports),
            len(self.load_reports),
            start_offset,
        )
        return state

    def stream(self, state: WorkerState, should_stop: Callable[[], bool]) -> WorkerState:
        """Apply micro-batches until ``should_stop()``; return the last stored state."""
        handoff = HandoffFilter(parse_txid_snapshot(state.snapshot))
        target = self.configuration.target
        for micro_batch in self.configuration.stream.micro_batches(state, should_stop):
            started = time.monotonic()
            batches = [handoff.filter(batch) for batch in micro_batch.batches]
            state = dataclasses.replace(state, position=batches[-1].position)
            rows = target.apply(batches, state)
            seconds = time.monotonic() - started
            mutations = sum(len(batch.mutations) for batch in batches)
            logger.info(
                "applied %d batch(es), %d mutation(s), %d row(s) in %.3fs (%.0f mutations/s); "
                "offset %d, lag %d message(s)",
                len(batches),
                mutations,
                rows,
                seconds,
                mutations / seconds if seconds > 0 else 0.0,
                state.next_offset - 1,
                micro_batch.lag,
            )
        return state
