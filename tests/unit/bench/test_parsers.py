"""Parsers of the benchmarks: relay batch log lines, /proc stat and status, modes."""

from __future__ import annotations

import os

import pytest

from bench._modes import MODES, settings
from bench._proc import parse_peak_rss, parse_stat
from bench._relaylog import batch_lines, throughput, time_split

RELAY_LOG = """\
2026-11-22 06:22:20,001 INFO pgshovel.relay.service: leading set 'relay'
2026-11-22 06:22:20,101 INFO pgshovel.relay.relay: batch 4: 0 events, 160 bytes, 0.004s, lag 0.050s
06:22:21,101 INFO pgshovel.relay.relay: batch 5: 20000 events, 4100000 bytes, 0.950s, lag 1.0s
2026-11-22 06:22:21,301 INFO pgshovel.relay.relay: batch 6: 10 events, 2000 bytes, 0.050s, lag 0.1s
"""


def test_relay_batch_lines_are_read_in_order() -> None:
    lines = batch_lines(RELAY_LOG)
    assert [line.batch for line in lines] == [4, 5, 6]
    assert lines[1].events == 20000 and lines[1].bytes == 4100000 and lines[1].seconds == 0.95


def test_throughput_counts_only_batches_with_events() -> None:
    events, seconds = throughput(batch_lines(RELAY_LOG))
    assert events == 20010
    assert seconds == pytest.approx(1.0)


SPLIT_LOG = """\
06:22:21,101 INFO pgshovel.relay.relay: batch 5: 200 events, 4100 bytes, 0.950s, lag 1.0s \
(reading 0.250s, decoding 0.500s, kafka 0.125s)
06:22:21,101 INFO pgshovel.relay.relay: batch 6: 0 events, 160 bytes, 0.010s, lag 1.0s \
(reading 0.001s, decoding 0.000s, kafka 0.009s)
06:22:21,101 INFO pgshovel.relay.relay: batch 7: 100 events, 2050 bytes, 0.500s, lag 1.0s
"""


def test_the_time_split_is_read_when_logged_and_zero_otherwise() -> None:
    lines = batch_lines(SPLIT_LOG)
    assert [line.batch for line in lines] == [5, 6, 7]
    assert (lines[0].reading, lines[0].decoding, lines[0].kafka) == (0.25, 0.5, 0.125)
    assert (lines[2].reading, lines[2].decoding, lines[2].kafka) == (0.0, 0.0, 0.0)
    assert time_split(lines) == (0.25, 0.5, 0.125)  # the empty batch 6 is not work


def test_stat_parsing_survives_spaces_and_parentheses_in_the_command() -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S", "41", *["0"] * 9, str(3 * ticks), str(ticks), *["0"] * 30]
    text = "1234 (python (odd) name) " + " ".join(fields)
    parent, cpu = parse_stat(text)
    assert parent == 41
    assert cpu == pytest.approx(4.0)


def test_stat_parsing_of_this_process() -> None:
    with open(f"/proc/{os.getpid()}/stat") as stat:
        parent, cpu = parse_stat(stat.read())
    assert parent == os.getppid()
    assert cpu > 0


def test_peak_rss_is_in_bytes() -> None:
    assert parse_peak_rss("Name:\tpython\nVmPeak:\t 900 kB\nVmHWM:\t  2048 kB\n") == 2 << 20
    assert parse_peak_rss("Name:\tkthreadd\n") == 0


def test_quick_mode_is_smaller_but_still_alternates_three_times() -> None:
    quick, full = settings("quick"), settings("full")
    assert quick.rounds >= 3 and full.rounds >= 3
    assert quick.relay_events < full.relay_events
    assert full.relay_events >= 200_000
    assert full.latency_rate == quick.latency_rate == 1000
    assert full.pgbench_clients == 4
    with pytest.raises(ValueError, match="BENCH=quick"):
        settings("fast")
    assert set(MODES) == {"full", "quick", "smoke"}
    assert (full.tf_rows, full.tf_upkeep_seconds) == (10_000, 600.0)
    assert quick.tf_rows < full.tf_rows and quick.tf_upkeep_seconds < full.tf_upkeep_seconds
