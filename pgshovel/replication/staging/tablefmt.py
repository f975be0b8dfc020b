"""Staging a micro-batch for the Delta and Iceberg targets as Parquet files, and combining them.

A Spark task writes each table's net effect (``reduce.StagedTable``, kept with
each row's source transaction, timestamp and provenance) as one Parquet file
under the micro-batch's own directory, ``<target files>/_staging/micro-batch-<id>/``,
named by task and attempt (``<task>a<attempt>_<n>.parquet``): the table's typed
columns, the change columns of the copy (``tables._effect``), the deleted flag,
and the change's place in the micro-batch (batch ordinal, event id). The task
returns a ``FileStage`` per file; the driver reads only the files of the
attempts Spark handed back (a retried or killed attempt's files are never
read) and ``combine``s each table's stages into one net effect: TRUNCATE if a
task read one (rows placed before the last one dropped), each key's row with
the greatest place across the tasks, the batch id of its ordinal. The target
then commits that through its ordinary micro-batch commit (written ahead,
intent, one commit per table) and removes the directory; what a crash leaves
is found by its name prefix and removed when the target opens.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pgshovel.errors import ConfigurationError, SchemaError, StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.staging.reduce import Place, StagedTable
from pgshovel.replication.tables._effect import effect_schema
from pgshovel.replication.tables._text import lines_to_arrow
from pgshovel.replication.targets._parquet_chunks import STAGING
from pgshovel.replication.targets._parquet_tables import PROVENANCE
from pgshovel.replication.targets._tablefmt_log import PendingTable
from pgshovel.source import TableShape

__all__ = [
    "EVENT",
    "MICRO_BATCH_PREFIX",
    "ORDINAL",
    "Combined",
    "FileStage",
    "TableStageSink",
    "combine",
    "combine_stages",
    "leftover_directories",
    "micro_batch_directory",
    "pending_tables",
    "read_stage",
    "remove_leftovers",
    "stage_rows",
    "stage_schema",
]

logger = logging.getLogger(__name__)

#: the name prefix of a micro-batch's staging directory under the target's ``_staging``
MICRO_BATCH_PREFIX = "micro-batch-"
ORDINAL = "_pgshovel_ordinal"
EVENT = "_pgshovel_event"


@dataclass(frozen=True)
class FileStage:
    """What a task staged for one table: the file, its rows, and its last TRUNCATE."""

    schema: str
    table: str
    path: str
    rows: int
    truncated: Place | None
    #: the last TRUNCATE's source txid and timestamp (µs), when one came
    truncated_by: tuple[int, int] | None
    #: the PgQ batch ids of the task's batches
    batches: tuple[int, ...] = ()


def stage_schema(shape: TableShape) -> pa.Schema:
    """A stage file's schema: the net effect's and the change's place in the micro-batch."""
    return (
        effect_schema(shape)
        .append(pa.field(ORDINAL, pa.int32()))
        .append(pa.field(EVENT, pa.int64()))
    )


def _provenance(raw: bytes) -> dict[str, object]:
    provenance = stream_pb2.Provenance.FromString(raw)
    return {
        "current_user": provenance.current_user or None,
        "session_user": provenance.session_user or None,
        "application_name": provenance.application_name or None,
        "client_addr": provenance.client_addr or None,
        "query_id": provenance.query_id or None,
        "annotation": provenance.annotation or None,
    }


def stage_rows(staged: StagedTable) -> pa.Table:
    """A task's net effect of one keyed table as a stage file's rows (``stage_schema``)."""
    shape = staged.shape
    if not shape.key:
        raise SchemaError(
            f"table {shape.qualified!r} has no key, and a table format copy is merged by key; "
            "declare key_columns for it in the set ('pgshovel-admin set update') or replicate "
            "it to the postgresql target"
        )
    lines: list[str] = []
    txids: list[int | None] = []
    batches: list[int | None] = []
    times: list[int | None] = []
    stamps: list[dict[str, object] | None] = []
    deleted: list[bool] = []
    ordinals: list[int] = []
    events: list[int] = []
    provenances = [_provenance(raw) for raw in staged.provenances]
    for key, ((ordinal, event), gone, line) in staged.rows.items():
        ordinals.append(ordinal)
        events.append(event)
        deleted.append(gone)
        detail = staged.details.get(key)
        if gone:
            # As the driver path: the deleting change's transaction and time, no batch.
            lines.append(staged.deleted_line(key))
            txids.append(None if detail is None else detail[0])
            batches.append(None)
            times.append(None if detail is None else detail[1])
            stamps.append(None)
            continue
        if detail is None:
            raise StreamError(
                f"{shape.qualified!r}: the row of key {key!r} was staged without its change's "
                "transaction; the stage task did not keep details (a pgshovel bug)"
            )
        batch = staged.batch_ids.get(ordinal)
        if batch is None:
            raise StreamError(
                f"{shape.qualified!r}: the row of key {key!r} was staged without its batch id; "
                "the stage task did not keep details (a pgshovel bug)"
            )
        lines.append(line)
        batches.append(batch)
        txids.append(detail[0])
        times.append(detail[1])
        stamps.append(provenances[detail[2] - 1] if detail[2] else None)
    data = lines_to_arrow(shape, lines)
    arrays = [
        *data.columns,
        pa.array(txids, pa.int64()),
        pa.array(batches, pa.int64()),
        pa.array(times, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array(stamps, PROVENANCE),
        pa.array(deleted, pa.bool_()),
        pa.array(ordinals, pa.int32()),
        pa.array(events, pa.int64()),
    ]
    return pa.Table.from_arrays(arrays, schema=stage_schema(shape))


def _write(path: Path, rows: pa.Table) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    pq.write_table(rows, temporary)
    os.replace(temporary, path)


@dataclass(frozen=True)
class TableStageSink:
    """Stages a task's tables as Parquet files in ``directory`` (``StageSink``; pickles into
    Spark tasks): each attempt of a task under its own names."""

    directory: str
    #: what ``run_stage_task`` asks ``reduce_messages`` for
    details: bool = True

    def stage(
        self, task: int, attempt: int, staged: dict[tuple[str, str], StagedTable]
    ) -> list[FileStage]:
        directory = Path(self.directory)
        directory.mkdir(parents=True, exist_ok=True)
        stages: list[FileStage] = []
        for number, table in enumerate(staged.values()):
            path = directory / f"{task}a{attempt}_{number}.parquet"
            rows = stage_rows(table)
            _write(path, rows)
            stages.append(
                FileStage(
                    table.shape.schema,
                    table.shape.name,
                    str(path),
                    rows.num_rows,
                    table.truncated,
                    table.truncated_by,
                    tuple(sorted(set(table.batch_ids.values()))),
                )
            )
        return stages


def read_stage(shape: TableShape, stage: FileStage) -> pa.Table:
    """A stage file's rows. A file the driver cannot find was written where it does not see:
    the target's path is not the same shared directory on the driver and the executors."""
    if not Path(stage.path).is_file():
        raise ConfigurationError(
            f"the staged rows of {shape.qualified!r} that a Spark task wrote to {stage.path!r} "
            "are not there for the driver: the target's path must be one directory shared by "
            "the driver and every executor; mount it at the same place on each machine, or set "
            "stage_min_mutations: 1000000000 in replication.yml to apply every micro-batch on "
            "the driver"
        )
    try:
        rows = pq.read_table(stage.path, schema=stage_schema(shape))
    except (OSError, pa.ArrowInvalid) as error:
        raise StreamError(
            f"the staged rows of {shape.qualified!r} in {stage.path!r} cannot be read ({error}); "
            "the file was changed after its task wrote it: restart the worker to stage the "
            "micro-batch again"
        ) from error
    return rows


def combine(shape: TableShape, parts: Sequence[pa.Table], truncated: Place | None) -> pa.Table:
    """One table's net effect (``effect_schema``) from its stages' rows: rows placed at or
    before ``truncated`` dropped, then each key's row with the greatest place. Pure."""
    schema = stage_schema(shape)
    rows = (
        pa.concat_tables([part.cast(schema) for part in parts]) if parts else schema.empty_table()
    )
    if truncated is not None and rows.num_rows:
        ordinal, event = rows.column(ORDINAL), rows.column(EVENT)
        after = pc.or_(
            pc.greater(ordinal, truncated[0]),
            pc.and_(pc.equal(ordinal, truncated[0]), pc.greater(event, truncated[1])),
        )
        rows = rows.filter(after)
    if rows.num_rows:
        rows = rows.sort_by([(ORDINAL, "descending"), (EVENT, "descending")])
        index = "_pgshovel_index"
        numbered = rows.append_column(index, pa.array(range(rows.num_rows), pa.int64()))
        first = numbered.group_by(list(shape.key), use_threads=False).aggregate([(index, "min")])
        chosen = first.column(f"{index}_min")
        rows = rows.take(pc.take(chosen, pc.sort_indices(chosen)))
    return rows.drop_columns([ORDINAL, EVENT]).cast(effect_schema(shape))


def micro_batch_directory(files: Path, micro_batch: str) -> Path:
    """Where a micro-batch's tasks stage, below a target's own files directory."""
    return files / STAGING / f"{MICRO_BATCH_PREFIX}{micro_batch}"


def leftover_directories(staging: Path) -> list[Path]:
    """The micro-batch staging directories under a target's ``_staging`` (a crash's)."""
    if not staging.is_dir():
        return []
    return sorted(
        path
        for path in staging.iterdir()
        if path.is_dir() and path.name.startswith(MICRO_BATCH_PREFIX)
    )


def remove_leftovers(kind: str, files: Path) -> None:
    """Remove the micro-batch staging directories a crash left below a target's files."""
    for directory in leftover_directories(files / STAGING):
        logger.info("%s target: removing a crash's staged files %s", kind, directory)
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class Combined:
    """One table's net effect of a staged micro-batch, ready for the target's commit."""

    shape: TableShape
    rows: pa.Table
    truncate: bool
    truncate_txid: int | None
    truncate_time: int | None


def combine_stages(shapes: Sequence[TableShape], stages: Sequence[FileStage]) -> list[Combined]:
    """Each staged table's net effect (``combine``) from the stages the driver got back, in
    the order of ``shapes`` (the copy's tables)."""
    out: list[Combined] = []
    for shape in shapes:
        mine = [stage for stage in stages if (stage.schema, stage.table) == shape.identity]
        if not mine:
            continue
        cuts = [
            (stage.truncated, stage.truncated_by) for stage in mine if stage.truncated is not None
        ]
        truncated, by = max(cuts, key=lambda cut: cut[0]) if cuts else (None, None)
        rows = combine(shape, [read_stage(shape, stage) for stage in mine], truncated)
        out.append(
            Combined(
                shape,
                rows,
                truncated is not None,
                None if by is None else by[0],
                None if by is None else by[1],
            )
        )
    return out


def pending_tables(
    shapes: Sequence[TableShape], stages: Sequence[FileStage]
) -> tuple[dict[tuple[str, str], PendingTable], tuple[int, ...]]:
    """The target's pending tables of a staged micro-batch (no shape changes: a micro-batch
    with one never stages) and the PgQ batch ids its tasks read."""
    tables = {
        table.shape.identity: PendingTable(
            table.shape,
            table.shape,
            table.rows,
            table.truncate,
            table.truncate_txid,
            table.truncate_time,
            {},
        )
        for table in combine_stages(shapes, stages)
    }
    return tables, tuple(sorted({batch for stage in stages for batch in stage.batches}))
