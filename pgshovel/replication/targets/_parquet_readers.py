"""Reading a Parquet target's committed data, without a worker: state, current rows, change log.

Everything goes through the state file (``_parquet_state``): the current rows of
a table are the version it names, the change log the files of the commits it
counts. A running worker removes a version's files once a newer one is
committed; readers that lose that race read the newer version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pgshovel.errors import ConfigurationError
from pgshovel.replication.targets import _arrow, _parquet_chunks, _parquet_state
from pgshovel.replication.targets._parquet_tables import table_directory
from pgshovel.stream.handoff import is_visible, parse_txid_snapshot
from pgshovel.stream.state import WorkerState

STATE_FILE = _parquet_state.STATE_FILE


def stored_state(path: str) -> WorkerState | None:
    """The worker state the state file at ``path`` commits, None if there is none yet; a
    ``StateError`` naming the field and the reload when it does not read."""
    stored = _parquet_state.read(Path(path))
    return None if stored is None else stored.state


def _stored(path: str) -> _parquet_state.Stored:
    stored = _parquet_state.read(Path(path))
    if stored is None:
        raise ConfigurationError(f"{path} holds no replicated data yet (no {STATE_FILE})")
    return stored


def applied(path: str, txid: int) -> bool:
    """Read-your-writes: whether source transaction ``txid``'s effect is in the copy at
    ``path`` (it is visible in the horizon of the last batch the state file commits)."""
    state = _stored(path).state
    if state.phase != "streaming":
        return False
    return is_visible(txid, parse_txid_snapshot(state.applied_horizon))


def current_path(path: str, schema: str, table: str) -> str:
    """The directory holding the committed current rows of ``schema.table``."""
    version = _stored(path).versions.get(f"{schema}.{table}")
    if version is None:
        raise ConfigurationError(f"{path} holds no current state of {schema!r}.{table!r}")
    return str(table_directory(Path(path), schema, table) / "current" / version)


def change_files(path: str, schema: str, table: str) -> list[str]:
    """The committed change log files of ``schema.table``, oldest first."""
    stored = _stored(path)
    directory = table_directory(Path(path), schema, table) / "changes"
    return [
        str(file)
        for file in sorted(directory.glob("*.parquet"))
        if _parquet_state.committed_change(file.stem, stored)
    ]


def read_current_text(path: str, schema: str, table: str) -> list[tuple[str | None, ...]]:
    """The current rows of ``schema.table``, every value as PostgreSQL's text (pyarrow, no
    Spark): exactly what ``COPY ... TO STDOUT`` prints on the source, for comparisons.

    A running worker removes a version's files once a newer one is committed; a read
    that loses that race reads the newer version instead."""
    while True:
        stored = _stored(path)
        shape, versions = stored.state.table(schema, table), stored.versions
        if shape is None:
            raise ConfigurationError(f"{path} does not replicate {schema!r}.{table!r}")
        version = versions.get(f"{schema}.{table}")
        try:
            rows = pq.read_table(
                current_path(path, schema, table), schema=_arrow.table_schema(shape)
            )
        except (OSError, pa.ArrowInvalid):
            if _stored(path).versions.get(f"{schema}.{table}") != version:
                continue  # replaced while we read it: read the committed one
            raise
        return [
            tuple(_parquet_chunks.texts(shape, row)) for row in _parquet_chunks.rows_as_python(rows)
        ]


def read_current(spark: Any, path: str, schema: str, table: str) -> Any:
    """The current rows of ``schema.table`` as a Spark DataFrame."""
    return spark.read.parquet(current_path(path, schema, table))


def read_changes(spark: Any, path: str, schema: str, table: str) -> Any:
    """The change log of ``schema.table`` as a Spark DataFrame (None when empty).

    Files written before and after a schema change have different columns:
    they are read with ``mergeSchema``."""
    files = change_files(path, schema, table)
    return spark.read.option("mergeSchema", "true").parquet(*files) if files else None
