"""What the demo prints: progress lines, snapshot news from the worker's log, the final table."""

from __future__ import annotations

from example._report import (
    CopyFigures,
    Sample,
    TableComparison,
    apply_line,
    caught_up,
    copy_figures,
    progress_line,
    render_comparison,
    snapshot_status,
)


def sample(**changes: object) -> Sample:
    values: dict[str, object] = {
        "elapsed": 12.0,
        "committed": 340,
        "aborted": 31,
        "phase": "streaming",
        "next_offset": 2100,
        "topic_end": 2110,
        "topic_start": 100,
    }
    values.update(changes)
    return Sample(**values)  # type: ignore[arg-type]


def test_progress_shows_workload_relayed_messages_and_lag() -> None:
    line = progress_line(sample())
    assert "340 tx (31 rolled back)" in line
    assert "relayed 2010 msgs" in line
    assert "lag 10 msgs" in line


def test_progress_before_streaming_shows_the_workers_phase() -> None:
    assert "worker starting Spark" in progress_line(sample(phase=None, next_offset=None))
    line = progress_line(sample(phase=None, next_offset=None, snapshot="0/~40 rows copied"))
    assert "loading the snapshot (0/~40 rows copied)" in line
    line = progress_line(sample(phase="snapshot", next_offset=None, snapshot="12/~40 rows copied"))
    assert "loading the snapshot (12/~40 rows copied)" in line
    assert sample(topic_end=None).relayed == 0 and sample(topic_end=None).lag is None


def test_the_live_line_shows_what_the_worker_applies_and_the_rows_per_table() -> None:
    document = {
        "mutations": 1234,
        "lag_seconds": 0.42,
        "history": {"interval": 10.0, "samples": [[1.0, 0.1, 80.0], [11.0, 0.5, 95.4]]},
    }
    figures = copy_figures(document)
    assert figures == CopyFigures(rate=95.4, lag_seconds=0.42, mutations=1234)
    line = apply_line(sample(copy=figures, table_rows=(("orders", 120), ("Shipping Notes", None))))
    assert line == (
        "       copy applies 95 mutations/s (1234 in all), lag 0.4 s "
        "| rows: orders 120, Shipping Notes -"
    )
    assert copy_figures(None) is None
    assert apply_line(sample()) == "       copy: no status yet"
    assert copy_figures({"history": {"samples": []}}) == CopyFigures(None, None, None)


def test_snapshot_status_sums_the_latest_progress_line_over_tables() -> None:
    log = "\n".join(
        [
            "x INFO pgshovel.replication.loaders: exported snapshot 3-1 (transactions 7:9:)",
            "x INFO pgshovel.replication.loaders: loading 2 table(s) in 4 range(s): "
            "public.a ~40 rows, public.Odd Name ~160 rows",
            "x INFO pgshovel.replication.progress: snapshot progress: public.a: 40/~40 rows "
            "(9 rows/s); public.Odd Name: 10/~160 rows (2 rows/s)",
        ]
    )
    assert snapshot_status(log) == "50/~200 rows copied"
    assert snapshot_status(log.rsplit("\n", 1)[0]) == "0/~200 rows copied"
    done = log + "\nx INFO pgshovel.replication.worker: snapshot loaded: 200 rows in 2 table(s)"
    assert snapshot_status(done) == "loaded 200 rows"
    # rows written while the snapshot is read: the count passes the planner's estimate
    grown = log.replace("10/~160 rows (2 rows/s)", "3658 rows (~160 estimated) (90 rows/s)")
    assert snapshot_status(grown) == "3698 rows (~200 estimated) copied"
    assert snapshot_status("spark warming up\n") is None


def test_caught_up_needs_the_topic_applied_and_the_queue_empty() -> None:
    assert caught_up(next_offset=50, topic_end=50, queue_pending=0)
    assert not caught_up(next_offset=49, topic_end=50, queue_pending=0)
    assert not caught_up(next_offset=50, topic_end=50, queue_pending=3)
    assert not caught_up(next_offset=None, topic_end=None, queue_pending=0)
    assert caught_up(next_offset=0, topic_end=None, queue_pending=0)


def test_comparison_table_lines_up_and_flags_differences() -> None:
    table = render_comparison(
        [
            TableComparison("orders", 500, 500, "a" * 32, "a" * 32),
            TableComparison("Shipping Notes", 7, 6, "b" * 32, "c" * 32),
            TableComparison("products", 40, None, "d" * 32, None),
        ]
    )
    lines = table.splitlines()
    assert lines[0].split() == [
        "table",
        "source",
        "rows",
        "target",
        "rows",
        "source",
        "md5",
        "target",
        "md5",
    ]
    assert lines[2].endswith("MATCH") and "aaaaaaaaaaaa" in lines[2]
    assert lines[3].startswith("Shipping Notes") and lines[3].endswith("DIFF")
    assert "missing" in lines[4] and lines[4].endswith("DIFF")
    # Counts are right-aligned in their columns.
    assert lines[2].index("500") + 3 == lines[3].index("7") + 1
