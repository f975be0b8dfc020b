"""Which sandbox a ``pgshovel-sandbox`` command means when it is not told.

The rule, in order:

1. ``--state-dir DIR`` (or ``PGSHOVEL_SANDBOX_DIR``): that directory.
2. Walking up from the current directory, at each directory: its ``.sandbox``
   when that holds ``sandbox.json``, else the sandbox ``up`` recorded for that
   directory (``up --state-dir DIR`` run there). So a command run anywhere
   inside a project finds the project's sandbox, and only that one.
3. For ``up``: ``./.sandbox``, created. Every other command fails with one line
   naming what it searched and the sandboxes recorded for other directories:
   a sandbox started elsewhere (a test suite's, another project's) is never
   picked silently.

``up`` records its directory for the directory it runs in (unless it is the
nearest ``.sandbox`` from there anyway), one file per directory in
``${XDG_STATE_HOME:-~/.local/state}/pgshovel/sandboxes/`` (JSON: ``project``,
``state_dir``); ``down --purge`` drops the records naming the purged sandbox.
Nothing here starts or stops anything.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox._state import STATE_FILE, write_atomically

logger = logging.getLogger(__name__)

DEFAULT_NAME = ".sandbox"
RECORDS = Path("pgshovel") / "sandboxes"
#: at most this many records of other directories are named when nothing is found
LISTED = 3


@dataclass(frozen=True)
class Located:
    """A sandbox's state directory and how it was found (for ``status`` to say)."""

    state_dir: Path
    #: ``--state-dir``, ``the .sandbox of DIR`` or ``recorded for DIR by 'up'``
    how: str

    def describe(self) -> str:
        return f"sandbox in {str(self.state_dir)!r} ({self.how})"


def records_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """``${XDG_STATE_HOME:-~/.local/state}/pgshovel/sandboxes``; None without a home."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    if not base:
        home = env.get("HOME", "")
        if not home:
            return None
        base = str(Path(home) / ".local" / "state")
    return Path(base) / RECORDS


def record_file(project: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The file that records the sandbox ``up`` started in ``project``."""
    directory = records_dir(environ)
    if directory is None:
        return None
    digest = hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:16]
    return directory / f"{digest}.json"


def _read(path: Path) -> tuple[Path, Path] | None:
    """``(project, state_dir)`` of a record that still names a sandbox; None otherwise."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        project, state_dir = Path(document["project"]), Path(document["state_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (state_dir / STATE_FILE).is_file():
        return None
    return project, state_dir


def recorded_for(project: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The state directory ``up`` recorded for ``project``, if it still holds a sandbox."""
    path = record_file(project, environ)
    found = _read(path) if path is not None else None
    if found is None or found[0] != project.resolve():
        return None
    return found[1]


def records(environ: Mapping[str, str] | None = None) -> list[tuple[Path, Path]]:
    """Every ``(project, state_dir)`` recorded whose sandbox is still there."""
    directory = records_dir(environ)
    if directory is None or not directory.is_dir():
        return []
    return sorted(filter(None, (_read(path) for path in directory.glob("*.json"))))


def search(
    start: Path, environ: Mapping[str, str] | None = None, *, recorded: bool = True
) -> Located | None:
    """Rule 2 from ``start``: the nearest ``.sandbox`` or (``recorded``) record."""
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / DEFAULT_NAME
        if (candidate / STATE_FILE).is_file():
            return Located(candidate, f"the {DEFAULT_NAME} of {str(directory)!r}")
        found = recorded_for(directory, environ) if recorded else None
        if found is not None:
            return Located(found, f"recorded for {str(directory)!r} by 'up'")
    return None


def nearest(start: Path) -> Path | None:
    """The nearest ``.sandbox`` holding ``sandbox.json`` in ``start`` or one of its parents."""
    found = search(start, recorded=False)
    return None if found is None else found.state_dir


def for_up(explicit: Path | None, cwd: Path | None = None) -> Path:
    """Where ``up`` starts (or finds) the sandbox: rules 1, 2 (its ``.sandbox`` part), then
    ``./.sandbox``."""
    if explicit is not None:
        return explicit.resolve()
    here = (cwd or Path.cwd()).resolve()
    return nearest(here) or here / DEFAULT_NAME


def locate_existing(
    explicit: Path | None, cwd: Path | None = None, environ: Mapping[str, str] | None = None
) -> Located:
    """The sandbox ``status``, ``env`` and ``down`` act on (rules 1 and 2), and how it was
    found; a ``SandboxError`` naming what was searched when there is none."""
    if explicit is not None:
        return Located(explicit.resolve(), "--state-dir")
    here = (cwd or Path.cwd()).resolve()
    found = search(here, environ)
    if found is not None:
        return found
    elsewhere = records(environ)
    listed = ", ".join(
        f"{str(state_dir)!r} (up in {str(project)!r})" for project, state_dir in elsewhere[:LISTED]
    )
    if len(elsewhere) > LISTED:
        listed += f" and {len(elsewhere) - LISTED} more"
    others = f"; recorded for other directories: {listed}" if listed else ""
    raise SandboxError(
        f"no sandbox found: no {DEFAULT_NAME}/{STATE_FILE} in {str(here)!r} or its parents, "
        f"and 'up' recorded none for them{others}; start one with 'pgshovel-sandbox up', or "
        "pass --state-dir DIR"
    )


def for_existing(
    explicit: Path | None, cwd: Path | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The state directory of :func:`locate_existing`."""
    return locate_existing(explicit, cwd, environ).state_dir


def remember(
    state_dir: Path, environ: Mapping[str, str] | None = None, *, project: Path | None = None
) -> None:
    """Record ``state_dir`` as the sandbox of ``project`` (default: the current directory),
    unless it is the nearest ``.sandbox`` from there anyway; a failure only logs a warning."""
    project = (project or Path.cwd()).resolve()
    path = record_file(project, environ)
    if path is None or nearest(project) == state_dir.resolve():
        return
    document = {"project": str(project), "state_dir": str(state_dir.resolve())}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(document) + "\n")
    except OSError as error:
        logger.warning("cannot record the sandbox in %s: %s", path, error)


def forget(state_dir: Path, environ: Mapping[str, str] | None = None) -> None:
    """Drop every record naming ``state_dir``."""
    directory = records_dir(environ)
    if directory is None or not directory.is_dir():
        return
    state_dir = state_dir.resolve()
    for path in directory.glob("*.json"):
        try:
            if Path(json.loads(path.read_text(encoding="utf-8"))["state_dir"]) == state_dir:
                path.unlink()
        except (OSError, ValueError, KeyError, TypeError):
            continue
