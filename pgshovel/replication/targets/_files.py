"""File helpers of the Parquet target: atomic replace (Parquet and JSON), an exclusive lock."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pgshovel.errors import AlreadyRunning


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``path`` completely or not at all (temporary file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, temporary)
    with temporary.open("rb") as written:
        os.fsync(written.fileno())
    os.replace(temporary, path)


def write_json(document: Any, path: Path) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", encoding="utf-8") as file:
        json.dump(document, file, indent=1, sort_keys=True)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def lock_directory(root: Path) -> IO[str]:
    """Hold an exclusive lock on ``root``'s lock file for as long as the file stays open."""
    handle = (root / ".pgshovel.lock").open("a", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        handle.close()
        raise AlreadyRunning(
            f"another replication worker holds {root}; stop it first "
            "(one worker per target directory)"
        ) from error
    return handle
