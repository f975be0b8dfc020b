"""Which sandbox a ``pgshovel-sandbox`` command means when it is not told.

The rule, in order:

1. ``--state-dir DIR`` (or ``PGSHOVEL_SANDBOX_DIR``): that directory.
2. The nearest ``.sandbox`` directory holding ``sandbox.json`` in the current
   directory or one of its parents (so a command run anywhere inside the
   project finds the project's sandbox).
3. For ``up``: ``./.sandbox``, created. For every other command: the sandbox
   ``up`` started last, whose directory ``up`` records in
   ``${XDG_STATE_HOME:-~/.local/state}/pgshovel/sandbox`` (so ``env`` and
   ``down`` work from any directory); ``down --purge`` forgets it again.

Nothing here starts or stops anything; the pointer file is plain text, one
absolute path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox._state import STATE_FILE, write_atomically

logger = logging.getLogger(__name__)

DEFAULT_NAME = ".sandbox"
POINTER = Path("pgshovel") / "sandbox"


def pointer_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """``${XDG_STATE_HOME:-~/.local/state}/pgshovel/sandbox``; None without a home directory."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    if not base:
        home = env.get("HOME", "")
        if not home:
            return None
        base = str(Path(home) / ".local" / "state")
    return Path(base) / POINTER


def nearest(start: Path) -> Path | None:
    """The nearest ``.sandbox`` holding ``sandbox.json`` in ``start`` or one of its parents."""
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / DEFAULT_NAME
        if (candidate / STATE_FILE).is_file():
            return candidate
    return None


def recorded(environ: Mapping[str, str] | None = None) -> Path | None:
    """The directory ``up`` recorded last, if it still holds a sandbox."""
    pointer = pointer_file(environ)
    if pointer is None:
        return None
    try:
        text = pointer.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text or not (Path(text) / STATE_FILE).is_file():
        return None
    return Path(text)


def for_up(explicit: Path | None, cwd: Path | None = None) -> Path:
    """Where ``up`` starts (or finds) the sandbox: rules 1, 2, then ``./.sandbox``."""
    if explicit is not None:
        return explicit.resolve()
    here = (cwd or Path.cwd()).resolve()
    return nearest(here) or here / DEFAULT_NAME


def for_existing(
    explicit: Path | None, cwd: Path | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The sandbox ``status``, ``env`` and ``down`` act on: rules 1, 2, then the record."""
    if explicit is not None:
        return explicit.resolve()
    here = (cwd or Path.cwd()).resolve()
    found = nearest(here) or recorded(environ)
    if found is None:
        pointer = pointer_file(environ)
        record = f"and {str(pointer)!r} names none" if pointer else "and HOME is not set"
        raise SandboxError(
            f"no sandbox found: no {DEFAULT_NAME}/{STATE_FILE} in {str(here)!r} or its parents "
            f"{record}; start one with 'pgshovel-sandbox up' or pass --state-dir"
        )
    return found


def remember(state_dir: Path, environ: Mapping[str, str] | None = None) -> None:
    """Record ``state_dir`` as the sandbox started last (a failure only logs a warning)."""
    pointer = pointer_file(environ)
    if pointer is None:
        return
    try:
        pointer.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(pointer, f"{state_dir.resolve()}\n")
    except OSError as error:
        logger.warning("cannot record the sandbox in %s: %s", pointer, error)


def forget(state_dir: Path, environ: Mapping[str, str] | None = None) -> None:
    """Drop the record if it names ``state_dir``."""
    pointer = pointer_file(environ)
    if pointer is None:
        return
    try:
        if Path(pointer.read_text(encoding="utf-8").strip()) == state_dir.resolve():
            pointer.unlink()
    except OSError:
        pass
