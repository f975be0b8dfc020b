"""The table_formats group's stream and figures: the same changes for both sizes, goals per kind."""

from __future__ import annotations

from bench import _tf_work, table_formats
from bench._modes import settings
from pgshovel.protocol import stream_pb2

Op = stream_pb2.Mutation


def _summary(maker: _tf_work.StreamMaker, batches: int) -> list[list[tuple[int, int]]]:
    """Each micro-batch's (operation, key relative to the table size)."""
    return [
        [(m.operation, m.columns_key - maker.rows) for m in _keyed(maker.batch(n))]
        for n in range(1, batches + 1)
    ]


class _Keyed:
    def __init__(self, mutation: stream_pb2.Mutation) -> None:
        self.operation = mutation.operation
        row = mutation.new if mutation.operation == Op.INSERT else mutation.old
        self.columns_key = row.columns[0].value.int64


def _keyed(batch: object) -> list[_Keyed]:
    return [_Keyed(mutation) for mutation in batch.mutations]  # type: ignore[attr-defined]


def test_the_stream_is_the_same_for_a_table_a_hundred_times_larger() -> None:
    small, large = _tf_work.StreamMaker(2_000, 300), _tf_work.StreamMaker(200_000, 300)
    assert _summary(small, 4) == _summary(large, 4)
    assert small.expected - small.rows == large.expected - large.rows == 4 * (100 - 50)


def test_every_micro_batch_touches_only_live_keys_once() -> None:
    maker = _tf_work.StreamMaker(500, 60)
    live = set(range(500))
    for number in range(1, 30):
        batch = _keyed(maker.batch(number))
        keys = [item.columns_key for item in batch]
        assert len(keys) == len(set(keys)) == 60
        for item in batch:
            if item.operation == Op.INSERT:
                assert item.columns_key not in live
                live.add(item.columns_key)
            else:
                assert item.columns_key in live
                if item.operation == Op.DELETE:
                    live.remove(item.columns_key)
    assert len(live) == maker.expected


def test_plans_hold_the_whole_micro_batch_and_the_state_after_it() -> None:
    plans = list(_tf_work.StreamMaker(100, 30).plans(2))
    assert [len(plan.batches[0].batch.mutations) for plan, _ in plans] == [30, 30]
    assert [state.position.cursor(0).next_offset for _, state in plans] == [2, 3]


def test_figures_judge_delta_and_iceberg_and_report_parquet() -> None:
    quick = settings("quick")
    runs = table_formats.TableFormatRuns(rows=2_000, changes=300, batches=5)
    for kind in ("delta", "iceberg", "parquet"):
        runs.seconds[kind] = {"small": [0.1], "large": [0.12]}
        runs.peak_mib[kind] = {"small": [300.0], "large": [330.0]}
    runs.rates = {"delta": [2_000.0], "iceberg": [900.0], "postgresql": [3_000.0]}
    runs.files = {"delta": [1, 2, 1], "iceberg": [2, 5, 3]}
    runs.notes["parquet"] = "not measured: OSError: disk full"
    made = {figure.key: figure for figure in table_formats.figures(runs, quick)}
    assert made["table_formats.delta.time"].met is True
    assert made["table_formats.delta.rss"].met is True
    assert made["table_formats.iceberg.time"].ratio == 0.12 / 0.1
    assert made["table_formats.parquet.time"].goals == ()
    assert made["table_formats.parquet.time"].note.startswith("not measured: ")
    assert made["table_formats.delta.throughput"].met is True
    assert made["table_formats.iceberg.throughput"].met is None
    files = made["table_formats.iceberg.files"]
    assert (files.value, files.baseline_value, files.met) == (3.0, 5.0, True)
    runs.files["iceberg"] = [5, 9, 12]
    made = {figure.key: figure for figure in table_formats.figures(runs, quick)}
    assert made["table_formats.iceberg.files"].met is False  # 12 > max_small_files 4 + 4


def test_a_missing_upkeep_stream_says_why() -> None:
    made = table_formats.figures(table_formats.TableFormatRuns(), settings("quick"))
    for figure in made:
        assert not figure.values
    files = {figure.key: figure for figure in made}["table_formats.delta.files"]
    assert files.note.startswith("not measured: ")
