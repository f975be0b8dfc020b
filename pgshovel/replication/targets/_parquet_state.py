"""The Parquet target's state file: the worker state, each table's current version, a commit count.

``_state.json`` holds one document: the worker state (``WorkerState``, with its
stream position), the committed version of each table's current rows, and
``commits``, the number of micro-batches committed so far. Everything a
micro-batch writes is named after the commit it belongs to
(``v000000042-0003``: commit 42, step 3), never after a stream position, so a
file is committed exactly when its commit number is at or below ``commits``;
replacing the state file is the commit. Directories written by 0.2 named files
by Kafka offsets: their current versions stay opaque names in the state, and
their change files are committed ones once the one-time upgrade
(``legacy_uncommitted``) removed what a crash left behind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgshovel.errors import StateError
from pgshovel.replication.targets import _files
from pgshovel.stream import _fields
from pgshovel.stream import state as worker_state
from pgshovel.stream.state import WorkerState

STATE_FILE = "_state.json"
#: The version of the state file ``write`` writes (0.2's had none: the state's own fields
#: and ``versions`` side by side).
FORMAT = 2


@dataclass(frozen=True)
class Stored:
    """What the state file says: the worker state, the current versions, the commits."""

    state: WorkerState
    versions: dict[str, str] = field(default_factory=dict)
    commits: int = 0
    #: a 0.2 state file: the offset of the last message its position names (-1: none),
    #: which its files' names are compared with once (``legacy_uncommitted``)
    legacy_applied: int | None = None


def version_name(commit: int, step: int) -> str:
    """The name of what commit ``commit`` wrote in its ``step``."""
    return f"v{commit:09d}-{step:04d}"


def commit_of(name: str) -> int | None:
    """The commit a file or version named by ``version_name`` belongs to; None for any other
    name (0.2's, a chunk attempt's)."""
    number = name[1:10]
    if name.startswith("v") and name[10:11] == "-" and number.isdigit():
        return int(number)
    return None


def legacy_uncommitted(name: str, applied: int) -> bool:
    """Whether a change file named by 0.2 (``<offset>-<step>``, offset of the micro-batch's
    last message) was written after the last commit of a 0.2 state whose position names
    ``applied``: the one place an offset is read from a name, at the upgrade."""
    head = name.split("-", 1)[0]
    return head.isdigit() and int(head) > applied


def committed_change(name: str, stored: Stored) -> bool:
    """Whether the change file ``name`` (without ``.parquet``) belongs to a commit."""
    commit = commit_of(name)
    if commit is not None:
        return commit <= stored.commits
    if stored.legacy_applied is not None:
        return not legacy_uncommitted(name, stored.legacy_applied)
    return True


def to_document(stored: Stored) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "state": worker_state.to_document(stored.state),
        "versions": dict(stored.versions),
        "commits": stored.commits,
    }


def _version(value: Any, path: str) -> str:
    """A version name: a directory of its own under the table's ``current`` (a name that
    leads elsewhere would make the target remove what is not its own)."""
    name = _fields.text(value, path)
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise _fields.wrong(path, "a version name (a file name of its own)", name)
    return name


def _table(value: Any, path: str) -> str:
    """A table's ``schema.name`` naming its directory (never one outside the target)."""
    name = _fields.text(value, path)
    if "." not in name or ".." in name.split("/") or name.startswith("/") or "\0" in name:
        raise _fields.wrong(path, "a table's 'schema.name'", name)
    return name


def _versions(value: Any, path: str) -> dict[str, str]:
    document = _fields.obj(value, path)
    return {
        _table(name, f"{path} key"): _version(version, f"{path}.{name}")
        for name, version in document.items()
    }


def from_document(value: Any) -> Stored:
    """The state file's content; a ``StateError`` names the field that does not read."""
    document = _fields.obj(value, "state file")
    if "format" not in document:
        # 0.2: the worker state's fields and the versions side by side.
        state = worker_state.from_document(
            {key: item for key, item in document.items() if key != "versions"}
        )
        versions = _versions(_fields.field(document, "versions", "", default={}), "versions")
        applied = state.position.cursor(0).next_offset - 1 if state.position.consumed else -1
        return Stored(state, versions, 0, legacy_applied=applied)
    number = _fields.integer(_fields.field(document, "format", ""), "format")
    if number > FORMAT:
        raise StateError(
            f"field 'format': format {number!r} is newer than this release reads "
            f"({FORMAT!r}); run the release that wrote it"
        )
    return Stored(
        worker_state.from_document(_fields.field(document, "state", "")),
        _versions(_fields.field(document, "versions", ""), "versions"),
        _fields.integer(_fields.field(document, "commits", ""), "commits", minimum=0),
    )


def reload_remedy(root: Path) -> str:
    """What makes the worker load the target at ``root`` afresh."""
    return (
        f"the target must be reloaded: remove the directory {str(root)!r} (rm -r) and start "
        "the worker again (it copies the set's tables afresh)"
    )


def read(root: Path) -> Stored | None:
    """The state file under ``root``, None if there is none; a ``StateError`` naming the
    field and the reload when it does not read."""
    path = root / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        try:
            document = json.loads(text)
        except ValueError as error:
            raise StateError(f"not JSON ({error})") from error
        return from_document(document)
    except StateError as error:
        raise StateError(
            f"the worker state in {str(path)!r} does not read: {error}; {reload_remedy(root)}"
        ) from error


def write(root: Path, stored: Stored) -> None:
    """Replace the state file atomically: the commit."""
    _files.write_json(to_document(stored), root / STATE_FILE)
