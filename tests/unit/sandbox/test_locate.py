"""Which sandbox a command means: --state-dir, else the nearest .sandbox or the sandbox 'up'
recorded for the current directory or a parent; never one started for another directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pgshovel.errors import SandboxError
from pgshovel.sandbox import _locate


def make_sandbox(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "sandbox.json").write_text("{}\n")
    return directory


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}


def test_explicit_directory_wins(tmp_path: Path, environ: dict[str, str]) -> None:
    make_sandbox(tmp_path / "project" / ".sandbox")
    explicit = tmp_path / "elsewhere"
    located = _locate.locate_existing(explicit, tmp_path / "project", environ)
    assert located == _locate.Located(explicit, "--state-dir")
    assert _locate.for_up(explicit, tmp_path / "project") == explicit


def test_nearest_sandbox_in_a_parent(tmp_path: Path, environ: dict[str, str]) -> None:
    project = make_sandbox(tmp_path / "project" / ".sandbox").parent
    deep = project / "src" / "deep"
    deep.mkdir(parents=True)
    located = _locate.locate_existing(None, deep, environ)
    assert located.state_dir == project / ".sandbox"
    assert located.describe() == (
        f"sandbox in {str(project / '.sandbox')!r} (the .sandbox of {str(project)!r})"
    )
    assert _locate.for_up(None, deep) == project / ".sandbox"


def test_a_dot_sandbox_without_record_is_skipped(tmp_path: Path, environ: dict[str, str]) -> None:
    outer = make_sandbox(tmp_path / ".sandbox")
    inner = tmp_path / "project"
    (inner / ".sandbox").mkdir(parents=True)  # a leftover: no sandbox.json
    assert _locate.for_existing(None, inner, environ) == outer


def test_up_creates_one_in_the_current_directory(tmp_path: Path) -> None:
    assert _locate.for_up(None, tmp_path) == tmp_path / ".sandbox"


def test_the_sandbox_up_recorded_for_a_directory_is_found_from_it_and_below(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    """'up --state-dir DIR' run in a project: its commands find DIR from the project."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    started = make_sandbox(tmp_path / "state")
    _locate.remember(started, environ, project=project)
    (record,) = (tmp_path / "xdg" / "pgshovel" / "sandboxes").iterdir()
    assert json.loads(record.read_text()) == {
        "project": str(project),
        "state_dir": str(started),
    }
    located = _locate.locate_existing(None, project / "src", environ)
    assert located == _locate.Located(started, f"recorded for {str(project)!r} by 'up'")
    # The nearest wins, a .sandbox or a record: a project inside has its own.
    inner = make_sandbox(project / "src" / ".sandbox").parent
    assert _locate.for_existing(None, inner, environ) == inner / ".sandbox"


def test_a_sandbox_started_for_another_directory_is_never_picked(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    """The defect: the one 'up' started last (a test suite's) answered everywhere."""
    mine = make_sandbox(tmp_path / "mine-state")
    theirs = make_sandbox(tmp_path / "suite-state")
    _locate.remember(mine, environ, project=tmp_path / "mine")
    _locate.remember(theirs, environ, project=tmp_path / "suite")
    assert _locate.for_existing(None, tmp_path / "mine", environ) == mine
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(SandboxError) as raised:
        _locate.for_existing(None, elsewhere, environ)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"no sandbox found: no .sandbox/sandbox.json in {str(elsewhere)!r}")
    assert f"{str(mine)!r} (up in {str(tmp_path / 'mine')!r})" in message
    assert f"{str(theirs)!r} (up in {str(tmp_path / 'suite')!r})" in message
    assert message.endswith("start one with 'pgshovel-sandbox up', or pass --state-dir DIR")


def test_without_xdg_state_home_the_records_are_under_home(tmp_path: Path) -> None:
    assert _locate.records_dir({"HOME": str(tmp_path)}) == (
        tmp_path / ".local" / "state" / "pgshovel" / "sandboxes"
    )


def test_forget_drops_only_the_records_of_its_sandbox(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    kept = make_sandbox(tmp_path / "a")
    purged = make_sandbox(tmp_path / "b")
    _locate.remember(kept, environ, project=tmp_path / "one")
    _locate.remember(purged, environ, project=tmp_path / "two")
    _locate.remember(purged, environ, project=tmp_path / "three")
    _locate.forget(purged, environ)
    assert _locate.records(environ) == [(tmp_path / "one", kept)]


def test_a_record_whose_sandbox_is_gone_is_ignored(tmp_path: Path, environ: dict[str, str]) -> None:
    gone = make_sandbox(tmp_path / "gone")
    _locate.remember(gone, environ, project=tmp_path)
    (gone / "sandbox.json").unlink()
    with pytest.raises(SandboxError, match=r"no sandbox found: .*'up' recorded none for them; "):
        _locate.for_existing(None, tmp_path, environ)


def test_nothing_found_is_one_line_naming_what_was_searched(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    with pytest.raises(SandboxError) as raised:
        _locate.for_existing(None, tmp_path, environ)
    message = str(raised.value)
    assert "\n" not in message
    assert str(tmp_path) in message
    assert "pgshovel-sandbox up" in message and "--state-dir" in message


def test_make_clean_stops_only_the_projects_own_sandbox() -> None:
    """``make clean`` (``sandbox-down``) names the project's .sandbox: never the nearest one
    of a parent directory, never one recorded elsewhere."""
    project = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        ["make", "-n", "-C", str(project), "clean"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    downs = [line for line in result.stdout.splitlines() if "pgshovel-sandbox down" in line]
    assert len(downs) == 1, result.stdout
    assert downs[0].endswith(f'pgshovel-sandbox down --state-dir "{project}/.sandbox"')


def test_the_nearest_dot_sandbox_needs_no_record(tmp_path: Path, environ: dict[str, str]) -> None:
    """'up' run below a project uses the project's .sandbox: recording it for the
    subdirectory would only hide how it was found."""
    state_dir = make_sandbox(tmp_path / "project" / ".sandbox")
    inside = tmp_path / "project" / "src"
    inside.mkdir()
    _locate.remember(state_dir, environ, project=inside)
    assert _locate.records(environ) == []
    assert _locate.locate_existing(None, inside, environ).how == (
        f"the .sandbox of {str(tmp_path / 'project')!r}"
    )
