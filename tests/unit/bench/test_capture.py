"""The capture group's figures: every comparison per settings and script, the bulk UPDATE, notes."""

from __future__ import annotations

from bench import capture
from bench._capture_figures import BULK_PARTS, runs_in, tps_part
from bench._modes import settings

QUICK = settings("quick")


def tps_runs(modes: tuple[str, ...]) -> dict[str, dict[str, list[float]]]:
    speed = {
        "none": 1000.0,
        "pgshovel": 800.0,
        "pgshovel-no-ddl": 810.0,
        "pgshovel-provenance": 780.0,
    }
    return {
        script: {mode: [speed.get(mode, 900.0)] * 3 for mode in modes} for script in capture.SCRIPTS
    }


def full_runs() -> capture.CaptureRuns:
    speed = {"none": 100_000.0, "logical": 90_000.0, "pgshovel-unpacked": 48_000.0}
    return capture.CaptureRuns(
        tps={name: tps_runs(modes) for name, modes in capture.TPS_CAPTURES.items()},
        bulk={
            name: {mode: [speed.get(mode, 60_000.0)] * 3 for mode in modes}
            for name, modes in capture.BULK_CAPTURES.items()
        },
    )


def test_every_capture_is_compared_fast_and_durable_and_in_bulk() -> None:
    figures = {figure.key: figure for figure in capture.figures(full_runs(), QUICK)}
    expected = []
    for script in ("tpcb", "update"):
        for key in (
            "pgshovel",
            "pgshovel_unpacked",
            "packing",
            "pgshovel_row",
            "pgshovel_provenance",
            "provenance",
            "pgshovel_plpgsql",
            "jsontriga",
            "floor",
            "logical",
            "pgshovel_floor",
            "pgshovel_logical",
            "trigger_bound",
            "trigger_bound_logical",
            "event_triggers",
        ):
            expected.append(f"capture.{script}.{key}")
    durable = ("pgshovel", "pgshovel_unpacked", "packing", "jsontriga", "floor", "logical")
    peers = ("pgshovel_floor", "pgshovel_logical", "trigger_bound", "trigger_bound_logical")
    for script in ("tpcb", "update"):
        for key in (*durable, *peers):
            expected.append(f"capture.{script}.{key}.durable")
    expected += [
        f"capture.bulk.{mode}"
        for mode in (
            "pgshovel",
            "pgshovel_unpacked",
            "packing",
            "pgshovel_row",
            "pgshovel_provenance",
            "provenance",
            "pgshovel_plpgsql",
            "jsontriga",
            "floor",
            "logical",
            *peers,
        )
    ]
    expected += [
        f"capture.bulk.{mode}.durable"
        for mode in (
            "pgshovel",
            "pgshovel_unpacked",
            "packing",
            "floor",
            "logical",
            *peers,
        )
    ]
    assert list(figures) == expected
    assert all(figure.values and figure.baseline and not figure.note for figure in figures.values())

    pgshovel = figures["capture.tpcb.pgshovel.durable"]
    assert pgshovel.ratio == 0.8 and pgshovel.met is False  # the goal stays 0.85
    assert "fsync+synchronous_commit on" in pgshovel.title
    assert pgshovel.details["durable"] is True

    versus_floor = figures["capture.update.pgshovel_floor"]
    assert versus_floor.baseline_title == "capture floor"
    assert versus_floor.gap is not None and round(versus_floor.gap, 3) == -0.1
    assert versus_floor.met is False

    bulk = figures["capture.bulk.pgshovel"]
    assert bulk.unit == "rows/s" and bulk.ratio == 0.6 and bulk.met is True
    # Against the logical peer: 0.6 of no capture against its 0.9.
    logical = figures["capture.bulk.pgshovel_logical.durable"]
    assert logical.gap is not None and round(logical.gap, 3) == -0.3 and logical.met is False
    assert logical.baseline_title == "logical decoding (wal2json) peer"
    assert figures["capture.bulk.packing"].ratio == 1.25
    assert figures["capture.tpcb.pgshovel_logical"].met is False  # 800 against 900
    # The trigger bound against the peer: a gap with no goal (0.6 against 0.9 of no capture).
    bound = figures["capture.bulk.trigger_bound_logical"]
    assert bound.gap is not None and round(bound.gap, 3) == -0.3 and bound.met is None

    # Provenance against pgshovel without it, in the same run: 780 / 800.
    provenance = figures["capture.update.provenance"]
    assert provenance.ratio == 0.975 and provenance.met is True
    assert provenance.baseline_title == "pgshovel without provenance"
    assert figures["capture.bulk.provenance"].ratio == 1.0


def test_quick_mode_runs_provenance_for_one_script_and_the_bulk_and_says_so() -> None:
    runs = full_runs()
    del runs.tps["fast"]["update"]["pgshovel-provenance"]
    figures = {figure.key: figure for figure in capture.figures(runs, QUICK)}
    assert figures["capture.tpcb.provenance"].values
    assert figures["capture.bulk.provenance"].values
    assert figures["capture.update.provenance"].note.startswith(
        "not measured: quick mode runs pgshovel-provenance"
    )
    assert runs_in(QUICK, "pgshovel-provenance", "tpcb")
    assert runs_in(QUICK, "pgshovel-provenance", "bulk")
    assert not runs_in(QUICK, "pgshovel-provenance", "update")
    assert runs_in(settings("full"), "pgshovel-provenance", "bulk")
    # The durable bulk statement: quick mode runs only pgshovel against no capture.
    assert [m for m in capture.BULK_CAPTURES["durable"] if runs_in(QUICK, m, "bulk-durable")] == [
        "none",
        "pgshovel",
    ]


def quick_plan() -> dict[str, list[str]]:
    """Quick mode's captures per part, as bench.capture runs them."""
    plan = {
        tps_part(name, script): [m for m in modes if runs_in(QUICK, m, tps_part(name, script))]
        for name, modes in capture.TPS_CAPTURES.items()
        for script in capture.SCRIPTS
    }
    for name, modes in capture.BULK_CAPTURES.items():
        part = BULK_PARTS[name]
        plan[part] = [m for m in modes if runs_in(QUICK, m, part)]
    return plan


def test_quick_mode_runs_every_capture_once_and_every_part_against_no_capture() -> None:
    plan = quick_plan()
    assert set(plan) == {
        "tpcb",
        "update",
        "tpcb-durable",
        "update-durable",
        "bulk",
        "bulk-durable",
    }
    everything = set(capture.TPS_CAPTURES["fast"]) | set(capture.BULK_CAPTURES["fast"])
    assert {mode for modes in plan.values() for mode in modes} == everything
    assert all(modes[:2] == ["none", "pgshovel"] for modes in plan.values())
    # durable commits are exercised by pgshovel against no capture only
    assert plan["tpcb-durable"] == plan["update-durable"] == plan["bulk-durable"]
    assert plan["tpcb-durable"] == ["none", "pgshovel"]
    # 75 runs of about a second in three alternating rounds; full mode runs all 156
    assert QUICK.rounds == 3
    assert sum(len(modes) for modes in plan.values()) * QUICK.rounds == 75
    full = settings("full")
    assert all(runs_in(full, mode, part) for part in plan for mode in everything)


def test_quick_mode_says_which_parts_a_capture_left_out_runs_in() -> None:
    figures = {figure.key: figure for figure in capture.figures(capture.CaptureRuns(), QUICK)}
    assert figures["capture.update.jsontriga"].note == (
        "not measured: quick mode runs jsontriga for tpcb"
    )
    assert figures["capture.tpcb.floor.durable"].note == (
        "not measured: quick mode runs floor for tpcb, update"
    )
    assert figures["capture.bulk.floor"].note.startswith("not measured: quick mode runs floor")
    assert figures["capture.tpcb.pgshovel.durable"].note == ""


def test_a_failed_part_or_a_missing_peer_is_reported_with_its_reason() -> None:
    runs = full_runs()
    del runs.tps["durable"]
    for script in runs.tps["fast"].values():
        del script["logical"]
    runs.failures = {"durable": "RuntimeError: fsync stayed off", "logical": "no wal2json"}
    figures = {figure.key: figure for figure in capture.figures(runs, QUICK)}
    assert figures["capture.tpcb.logical"].note == "not measured: no wal2json"
    assert figures["capture.tpcb.pgshovel.durable"].note == (
        "not measured: RuntimeError: fsync stayed off"
    )
    assert figures["capture.tpcb.pgshovel"].note == "" and figures["capture.tpcb.pgshovel"].values
    # the bulk part measured its logical runs before the peer failed: they stand
    assert figures["capture.bulk.logical"].note == "" and figures["capture.bulk.logical"].values


def test_an_empty_run_still_lists_every_figure() -> None:
    figures = capture.figures(capture.CaptureRuns(), QUICK)
    assert len(figures) == 2 * 15 + 2 * 10 + 14 + 9
    assert all(not figure.values for figure in figures)
