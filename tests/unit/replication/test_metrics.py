"""Worker metrics: apply lag from the oldest unapplied change, snapshot progress, status text."""

from __future__ import annotations

from pgshovel.metrics import exposition
from pgshovel.protocol import stream_pb2
from pgshovel.replication.metrics import WorkerMetrics, oldest_change_seconds
from pgshovel.replication.status import status_document
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState
from tests._positions import after

LABELS = 'cluster="main",set="orders"'
TASK = 'cluster="main",purpose="backfill",set="orders",table="public.big"'


def batch(start: float, mutation_times: list[float], offset: int = 7) -> CommittedBatch:
    begin = stream_pb2.Begin(start=stream_pb2.Tick(id=1, timestamp=int(start * 1e6)))
    mutations = tuple(
        stream_pb2.Mutation(id=i, timestamp=int(t * 1e6)) for i, t in enumerate(mutation_times)
    )
    return CommittedBatch(
        node=b"n" * 16,
        batch_id=1,
        begin=begin,
        mutations=mutations,
        position=after(offset, b"p", 1),
    )


def test_the_oldest_change_is_bounded_by_the_start_tick_and_the_event_time() -> None:
    assert oldest_change_seconds([]) is None
    # idle for a minute, then a fresh event: its event time counts
    assert oldest_change_seconds([batch(940.0, [999.0, 999.5])]) == 999.0
    # a long transaction (event time older than the tick): the tick counts
    assert oldest_change_seconds([batch(990.0, [900.0])]) == 990.0
    # a batch without mutations holds nothing to wait for, whatever its start tick's age
    assert oldest_change_seconds([batch(995.0, []), batch(996.0, [997.0])]) == 997.0
    assert oldest_change_seconds([batch(940.0, [])]) is None


def test_a_micro_batch_without_mutations_shows_no_lag() -> None:
    metrics = WorkerMetrics(batch_lag_seconds=0.2)
    state = WorkerState("streaming", "1:1:", StreamPosition.start((0,)))
    metrics.read([batch(940.0, [])])  # an idle tick's batch, its start tick a minute old
    assert metrics.lag_seconds(now=1000.0) == 0.0
    assert metrics.applied(1, 0, 0, state) == 0.0
    assert metrics.batch_lag_seconds == 0.2


def test_apply_lag_grows_until_the_target_commits() -> None:
    metrics = WorkerMetrics()
    state = WorkerState("streaming", "1:1:", StreamPosition.start((0,)))
    metrics.read([batch(990.0, [995.0])])
    assert metrics.lag_seconds(now=1000.0) == 5.0
    # the target fails; the retry reads the same changes again: still from 995
    metrics.read([batch(990.0, [995.0])])
    assert metrics.lag_seconds(now=1030.0) == 35.0
    lag = metrics.applied(1, 1, 1, state.replace(position=batch(0, []).position))
    assert lag > 0 and metrics.lag_seconds() == 0.0
    assert (metrics.micro_batches, metrics.batches, metrics.mutations, metrics.offset) == (
        1,
        1,
        1,
        7,
    )
    metrics.read([batch(1040.0, [1041.0])])
    metrics.idle(state, 0)
    assert metrics.lag_seconds() == 0.0


def test_series_show_snapshot_progress_per_table() -> None:
    metrics = WorkerMetrics(mutations=12, streaming=True)
    metrics.state = WorkerState(
        "streaming",
        "1:1:",
        StreamPosition.start((0,)),
        tasks=(
            SnapshotTask(
                "a",
                "public",
                "big",
                "backfill",
                ranges=((None, ("5",)), (("5",), None)),
                done=(0,),
                rows=500,
                estimate=1000,
            ),
            SnapshotTask("b", "public", "big", "backfill", rows=0, estimate=10),
        ),
    )
    text = exposition("pgshovel_worker", ("main", "orders"), metrics.series())
    assert f"pgshovel_worker_mutations_total{{{LABELS}}} 12.0" in text
    assert f"pgshovel_worker_snapshot_rows{{{TASK}}} 500.0" in text
    assert f"pgshovel_worker_snapshot_rows_estimated{{{TASK}}} 1010.0" in text
    assert f"pgshovel_worker_snapshot_ranges_remaining{{{TASK}}} 1.0" in text
    metrics.history.observe(1990.0, 0.5, 0)
    metrics.history.observe(2000.0, 1.5, 12)
    metrics.failed(ConnectionError("target gone"))
    document = status_document(metrics, "PostgresTarget", 2000.0)
    assert document["phase"] == "streaming" and document["mutations"] == 12
    # the console's charts and error list
    assert document["history"]["samples"] == [[2000.0, 1.5, 1.2]]
    assert document["errors"] == 1 and document["recent_errors"][0]["message"] == "target gone"
    assert document["tasks"][0] == {
        "table": "public.big",
        "purpose": "backfill",
        "rows": 500,
        "estimate": 1000,
    }


def test_the_status_says_what_is_being_applied_and_since_when() -> None:
    metrics = WorkerMetrics(streaming=True)
    state = WorkerState("streaming", "1:1:", StreamPosition.start((0,)))
    assert status_document(metrics, "PostgresTarget", 100.0)["applying"] is None
    metrics.read([batch(990.0, [995.0, 996.0])])
    applying = status_document(metrics, "PostgresTarget", 100.0, "postgresql:h:5432/db")
    assert applying["copy"] == "postgresql:h:5432/db"
    assert applying["applying"]["mutations"] == 2 and applying["applying"]["batches"] == 1
    since = applying["applying"]["since"]
    metrics.read([batch(990.0, [995.0, 996.0])])  # the same batch again (a retry)
    assert metrics.applying is not None and metrics.applying.since == since
    metrics.applied(1, 2, 2, state)
    assert status_document(metrics, "PostgresTarget", 100.0)["applying"] is None


def test_copies_are_named_by_their_target() -> None:
    from pgshovel.replication.targets import copy_name
    from pgshovel.replication.targets.parquet import ParquetTarget
    from pgshovel.replication.targets.postgresql import PostgresTarget

    target = PostgresTarget("host=db.example port=5433 dbname=copy user=u password=secret")
    assert copy_name(target) == "postgresql:db.example:5433/copy"
    assert copy_name(ParquetTarget("/data/copy")) == "parquet:/data/copy"
    assert copy_name(object()) == "object"


def test_the_target_labels_every_series_and_tables_count_applied_mutations() -> None:
    metrics = WorkerMetrics(streaming=True)
    state = WorkerState("streaming", "1:1:", StreamPosition.start((0,)))
    read = batch(990.0, [995.0, 996.0])
    metrics.read([read])
    assert not metrics.tables, "read, not applied"
    metrics.discarded()  # the target failed: read again later
    metrics.read([read])
    metrics.applied(1, 2, 2, state)
    text = exposition(
        "pgshovel_worker",
        ("main", "orders"),
        metrics.series(),
        {"target": "postgresql:h:5432/copy"},
    )
    labels = 'cluster="main",set="orders",target="postgresql:h:5432/copy"'
    assert f"pgshovel_worker_mutations_total{{{labels}}} 2.0" in text
    assert f"pgshovel_worker_backlog_messages{{{labels}}} 0.0" in text
    tables = 'cluster="main",schema="",set="orders",table="",target="postgresql:h:5432/copy"'
    assert f"pgshovel_worker_table_mutations_total{{{tables}}} 2.0" in text
    metrics.succeeded()
    assert metrics.readiness() == (True, "ready")
    assert WorkerMetrics().readiness()[0] is False
