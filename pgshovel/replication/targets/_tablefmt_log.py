"""The Delta and Iceberg targets' own files: worker state, intent log, written-ahead effects.

Under ``<root>/_pgshovel/<cluster>.<set>/`` (names escaped as table paths are):

    state.json                 {"counter": N, "state": <WorkerState document>}
    intents/<counter>.json     the library's intent log (``tables._intents``)
    pending/<counter>/         the micro-batch being committed: its worker state after
                               it, the tables it drops, and per table its net effect
                               (Parquet) and how its shape and name change (JSON)
    snapshot/<schema>/<table>/<range>.json   the files each snapshot range wrote
    _staging/                  incremental snapshot chunks (as the Parquet target stages)

Every file is written durably (temporary file, fsync, rename, fsync of the
directory). The pending micro-batch is written before its intent, so a table
that a crash left behind the intent gets exactly the same net effect again on
start, without reading the stream again.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pgshovel.protocol import stream_pb2
from pgshovel.source import TableShape
from pgshovel.stream.state import (
    WorkerState,
    from_document,
    shape_from_document,
    shape_to_document,
    to_document,
)

__all__ = ["Pending", "PendingTable", "TargetFiles"]


def write_durably(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    handle = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


@dataclass(frozen=True)
class PendingTable:
    """One table's net effect of the pending micro-batch, as written ahead."""

    before: TableShape | None
    shape: TableShape
    rows: pa.Table
    truncate: bool
    truncate_txid: int | None
    truncate_time: int | None
    defaults: dict[str, stream_pb2.Value]


@dataclass(frozen=True)
class Pending:
    counter: int
    state: WorkerState
    tables: dict[tuple[str, str], PendingTable]
    #: tables dropped in the source: their copies go before the table commits
    dropped: tuple[TableShape, ...] = ()


class TargetFiles:
    """The files of one set's copy in one Delta or Iceberg target (see the module docstring)."""

    def __init__(self, root: Path, cluster: str, set_name: str) -> None:
        from pgshovel.replication.tables._delta import table_path

        self.directory = Path(table_path(root / "_pgshovel", cluster, set_name))

    @property
    def intents(self) -> Path:
        return self.directory / "intents"

    @property
    def staging(self) -> Path:
        return self.directory

    def _pending(self, counter: int) -> Path:
        return self.directory / "pending" / f"{counter:020d}"

    # -- the worker state --------------------------------------------------------------

    def read_state(self) -> tuple[int, WorkerState] | None:
        path = self.directory / "state.json"
        if not path.exists():
            return None
        document = json.loads(path.read_text(encoding="utf-8"))
        return int(document["counter"]), from_document(document["state"])

    def write_state(self, counter: int, state: WorkerState) -> None:
        document = {"counter": counter, "state": to_document(state)}
        write_durably(self.directory / "state.json", json.dumps(document).encode("utf-8"))

    def reset(self) -> None:
        """Forget every micro-batch (a new snapshot starts the copy over)."""
        for name in ("intents", "pending", "snapshot"):
            shutil.rmtree(self.directory / name, ignore_errors=True)

    # -- the micro-batch being committed ------------------------------------------------

    def write_pending(self, pending: Pending) -> None:
        directory = self._pending(pending.counter)
        shutil.rmtree(directory, ignore_errors=True)
        tables = []
        for index, table in enumerate(pending.tables.values()):
            buffer = pa.BufferOutputStream()
            pq.write_table(table.rows, buffer)
            write_durably(directory / f"{index}.parquet", buffer.getvalue().to_pybytes())
            tables.append(
                {
                    "before": None if table.before is None else shape_to_document(table.before),
                    "shape": shape_to_document(table.shape),
                    "truncate": table.truncate,
                    "truncate_txid": table.truncate_txid,
                    "truncate_time": table.truncate_time,
                    "defaults": {
                        name: base64.b64encode(value.SerializeToString()).decode("ascii")
                        for name, value in table.defaults.items()
                    },
                }
            )
        document = {
            "state": to_document(pending.state),
            "tables": tables,
            "dropped": [shape_to_document(shape) for shape in pending.dropped],
        }
        write_durably(directory / "pending.json", json.dumps(document).encode("utf-8"))

    def read_pending(self, counter: int) -> Pending | None:
        directory = self._pending(counter)
        if not (directory / "pending.json").exists():
            return None
        document: dict[str, Any] = json.loads((directory / "pending.json").read_text("utf-8"))
        tables = {}
        for index, entry in enumerate(document["tables"]):
            shape = shape_from_document(entry["shape"])
            defaults = {}
            for name, text in entry["defaults"].items():
                value = stream_pb2.Value()
                value.ParseFromString(base64.b64decode(text))
                defaults[name] = value
            tables[shape.identity] = PendingTable(
                None if entry["before"] is None else shape_from_document(entry["before"]),
                shape,
                pq.read_table(directory / f"{index}.parquet"),
                bool(entry["truncate"]),
                entry["truncate_txid"],
                entry["truncate_time"],
                defaults,
            )
        dropped = tuple(shape_from_document(shape) for shape in document.get("dropped", []))
        return Pending(counter, from_document(document["state"]), tables, dropped)

    def drop_pending(self) -> None:
        shutil.rmtree(self.directory / "pending", ignore_errors=True)

    # -- the initial snapshot's files ---------------------------------------------------

    def manifest_directory(self, shape: TableShape) -> Path:
        from pgshovel.replication.tables._delta import table_path

        return Path(table_path(self.directory / "snapshot", shape.schema, shape.name))
