"""Which sandbox a command means: --state-dir, else the nearest .sandbox, else up's record."""

from __future__ import annotations

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
    assert _locate.for_existing(explicit, tmp_path / "project", environ) == explicit
    assert _locate.for_up(explicit, tmp_path / "project") == explicit


def test_nearest_sandbox_in_a_parent(tmp_path: Path, environ: dict[str, str]) -> None:
    project = make_sandbox(tmp_path / "project" / ".sandbox").parent
    deep = project / "src" / "deep"
    deep.mkdir(parents=True)
    assert _locate.for_existing(None, deep, environ) == project / ".sandbox"
    assert _locate.for_up(None, deep) == project / ".sandbox"


def test_a_dot_sandbox_without_record_is_skipped(tmp_path: Path, environ: dict[str, str]) -> None:
    outer = make_sandbox(tmp_path / ".sandbox")
    inner = tmp_path / "project"
    (inner / ".sandbox").mkdir(parents=True)  # a leftover: no sandbox.json
    assert _locate.for_existing(None, inner, environ) == outer


def test_up_creates_one_in_the_current_directory(tmp_path: Path) -> None:
    assert _locate.for_up(None, tmp_path) == tmp_path / ".sandbox"


def test_the_sandbox_up_started_last_is_found_from_anywhere(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    started = make_sandbox(tmp_path / "project" / "state")
    _locate.remember(started, environ)
    assert (tmp_path / "xdg" / "pgshovel" / "sandbox").read_text() == f"{started}\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _locate.for_existing(None, elsewhere, environ) == started
    # A project's own sandbox still comes first.
    project = make_sandbox(tmp_path / "other" / ".sandbox").parent
    assert _locate.for_existing(None, project, environ) == project / ".sandbox"


def test_without_xdg_state_home_the_record_is_under_home(tmp_path: Path) -> None:
    assert _locate.pointer_file({"HOME": str(tmp_path)}) == (
        tmp_path / ".local" / "state" / "pgshovel" / "sandbox"
    )


def test_forget_drops_only_its_own_record(tmp_path: Path, environ: dict[str, str]) -> None:
    started = make_sandbox(tmp_path / "a")
    _locate.remember(started, environ)
    _locate.forget(tmp_path / "b", environ)
    assert _locate.recorded(environ) == started
    _locate.forget(started, environ)
    assert _locate.recorded(environ) is None


def test_a_record_whose_sandbox_is_gone_is_ignored(tmp_path: Path, environ: dict[str, str]) -> None:
    gone = make_sandbox(tmp_path / "gone")
    _locate.remember(gone, environ)
    (gone / "sandbox.json").unlink()
    with pytest.raises(SandboxError, match=r"no sandbox found: .*start one with"):
        _locate.for_existing(None, tmp_path, environ)


def test_nothing_found_is_one_line_naming_what_was_searched(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    with pytest.raises(SandboxError) as raised:
        _locate.for_existing(None, tmp_path, environ)
    message = str(raised.value)
    assert "\n" not in message
    assert str(tmp_path) in message and str(tmp_path / "xdg") in message
    assert "pgshovel-sandbox up" in message and "--state-dir" in message
