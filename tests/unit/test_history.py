"""The hour of samples and the last errors a process keeps for its status document."""

from __future__ import annotations

import json

from pgshovel.history import ERROR_CHARACTERS, History, RecentErrors


def test_samples_close_every_interval_with_the_peak_lag_and_the_rate() -> None:
    history = History(interval=10.0)
    history.observe(1000.0, 0.5, 100)
    history.observe(1004.0, 7.0, 150)  # a spike between two samples
    history.observe(1008.0, 1.0, 180)
    assert list(history.samples) == []
    history.observe(1010.0, 2.0, 300)
    assert list(history.samples) == [(1010.0, 7.0, 20.0)]  # 200 in 10 s
    history.observe(1015.0, 0.0, 300)
    history.observe(1021.0, 0.0, 350)
    # the next sample starts with the lag observed when the last one closed
    assert list(history.samples)[-1] == (1021.0, 2.0, round(50 / 11, 3))


def test_the_open_sample_is_shown_so_a_new_process_has_a_point_at_once() -> None:
    history = History(interval=10.0)
    assert history.document() == {"interval": 10.0, "samples": []}
    history.observe(1000.0, 0.0, 0)
    assert history.document()["samples"] == []  # one observation: no rate yet
    history.observe(1002.0, 1.5, 40)
    assert history.document()["samples"] == [[1002.0, 1.5, 20.0]]
    assert list(history.samples) == []  # still open


def test_an_hour_is_kept_and_the_document_stays_small() -> None:
    history = History()
    for second in range(0, 2 * 3600, 1):
        history.observe(1000.0 + second, 123.456, second * 1000)
    assert len(history.samples) == 360
    assert history.samples[0][0] >= 1000.0 + 3600  # the first hour was dropped
    assert len(json.dumps(history.document())) < 16_000


def test_a_clock_going_back_or_a_counter_going_down_gives_no_negative_rate() -> None:
    history = History(interval=10.0)
    history.observe(1000.0, 0.0, 500)
    history.observe(990.0, 0.0, 10)  # the clock went back: a new sample starts
    history.observe(1001.0, 0.0, 0)  # the counter restarted
    assert history.document()["samples"] == [[1001.0, 0.0, 0.0]]


def test_recent_errors_keep_the_last_ones_on_one_line_each() -> None:
    errors = RecentErrors(kept=3)
    for number in range(5):
        errors.record(100.0 + number, f"failure {number}\n  context line")
    assert errors.document() == [
        {"time": 102.0, "message": "failure 2 context line"},
        {"time": 103.0, "message": "failure 3 context line"},
        {"time": 104.0, "message": "failure 4 context line"},
    ]
    errors.record(200.0, "x" * 5000)
    message = errors.document()[-1]["message"]
    assert len(message) == ERROR_CHARACTERS and message.endswith("…")
