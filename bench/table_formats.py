"""Micro-batch apply cost of the table formats against a small and a 100x larger table.

``python -m bench.table_formats [--small 10000] [--large 1000000] [--batches 5]``
needs no services (delta-rs and pyiceberg on a temporary directory; not part of
``make bench`` until the worker's Delta and Iceberg targets exist). For each
format and table size it builds the table (key-ordered files of 10,000 rows,
the same for both sizes), then, in a fresh child process, applies the same
stream of micro-batches of 3,000 changes and reports the median seconds per
micro-batch and the child's peak RSS. Two streams: ``recent`` (1,000 inserts
of new keys, 1,500 updates and 500 deletes among the 5,000 highest keys: what
an OLTP table's changes look like) and ``random`` (3,000 changes spread over
the whole key space: every file is touched, and copy-on-write formats rewrite
them all). Variants: the Delta MERGE with and without the key-range bounds,
the Iceberg commit (touched files replaced in one snapshot) and pyiceberg's ``upsert``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
from pyiceberg.expressions import In

from pgshovel.replication.tables._delta import DeltaTables
from pgshovel.replication.tables._effect import (
    DELETED,
    TXID,
    CommitRecord,
    NetEffect,
    effect_schema,
)
from pgshovel.replication.tables._iceberg import IcebergTables
from pgshovel.replication.tables._snapshot import (
    SnapshotWriter,
    commit_delta_snapshot,
    commit_iceberg_snapshot,
    snapshot_directory,
)
from pgshovel.source import Column, KeyRange, TableShape

SHAPE = TableShape(
    "public",
    "bench",
    (
        Column("id", "bigint", "int8", True, 1),
        Column("name", "text", "text", False, 2),
        Column("qty", "integer", "int4", False, 3),
    ),
    ("id",),
)
FILE_ROWS = 10_000
CHANGES = 3_000
APP = "bench"


def build(kind: str, root: Path, rows: int) -> None:
    """The table with ``rows`` rows in key-ordered files of FILE_ROWS rows, one commit (the
    snapshot path: COPY text per key range, ``SnapshotWriter``, one commit)."""
    tables: DeltaTables | IcebergTables = (
        DeltaTables(root, APP) if kind == "delta" else IcebergTables(root, APP)
    )
    tables.create(SHAPE)
    writer = SnapshotWriter(SHAPE, snapshot_directory(tables, SHAPE), rows_per_file=FILE_ROWS)
    files = []
    for index, first in enumerate(range(0, rows, FILE_ROWS)):
        keys = range(first, min(rows, first + FILE_ROWS))

        def copy_out(file: IO[bytes], keys: range = keys) -> None:
            file.write("".join(f"{n}\tname {n}\t{n % 1000}\n" for n in keys).encode())

        files += writer.load_range(KeyRange(SHAPE, index, None, None), copy_out)
    record = CommitRecord(1, json.dumps({"counter": 1}), "1:1:", (1,))
    if isinstance(tables, DeltaTables):
        commit_delta_snapshot(tables, SHAPE, files, record)
    else:
        commit_iceberg_snapshot(tables, SHAPE, files, record)


def stream(rows: int, batches: int, pattern: str, seed: int = 11) -> list[NetEffect]:
    """The same micro-batches of CHANGES net changes for a table of ``rows`` keys."""
    rng = random.Random(seed)  # noqa: S311 (benchmark data)
    effects = []
    next_key = rows
    for number in range(batches):
        txid = 1000 + number
        if pattern == "recent":
            touched = rng.sample(range(max(0, next_key - 5000), next_key), 2000)
            inserted = list(range(next_key, next_key + 1000))
            next_key += 1000
        else:
            touched = rng.sample(range(next_key), CHANGES)
            inserted = []
        names, qty, deleted, ids = [], [], [], []
        for index, key in enumerate(touched):
            gone = index % 4 == 0
            ids.append(key)
            deleted.append(gone)
            names.append(None if gone else f"updated {key} {txid}")
            qty.append(None if gone else rng.randrange(1000))
        for key in inserted:
            ids.append(key)
            deleted.append(False)
            names.append(f"new {key}")
            qty.append(7)
        columns: dict[str, Any] = {"id": ids, "name": names, "qty": qty, DELETED: deleted}
        schema = effect_schema(SHAPE)
        for field in schema:
            if field.name not in columns:
                value = txid if field.name == TXID else None
                columns[field.name] = [value] * len(ids)
        effects.append(NetEffect(SHAPE, pa.Table.from_pydict(columns, schema=schema)))
    return effects


def _apply(kind: str, variant: str, root: Path, effect: NetEffect, counter: int) -> None:
    counter += 1  # the snapshot was micro-batch 1
    record = CommitRecord(counter, json.dumps({"counter": counter}), "1:1:", (counter,))
    if kind == "delta":
        DeltaTables(root, APP, prune_by_key_range=variant == "bounded").commit(effect, record)
    elif variant == "upsert":
        table = IcebergTables(root, APP).table(SHAPE)
        upserts = effect.upserts()
        deletes = effect.rows.filter(effect.deleted)
        with table.transaction() as transaction:
            if deletes.num_rows:
                gone = In(term="id", literals=set(deletes.column("id").to_pylist()))
                transaction.delete(gone)
            transaction.upsert(upserts, join_cols=["id"])
    else:
        IcebergTables(root, APP).commit(effect, record)


def child(arguments: argparse.Namespace) -> None:
    effects = stream(arguments.rows, arguments.batches, arguments.pattern)
    seconds = []
    for counter, effect in enumerate(effects, start=1):
        started = time.perf_counter()
        _apply(arguments.kind, arguments.variant, Path(arguments.root), effect, counter)
        seconds.append(time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mib": peak}))


VARIANTS = [
    ("delta", "bounded"),
    ("delta", "unbounded"),
    ("iceberg", "replace"),
    ("iceberg", "upsert"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--patterns", default="recent,random")
    parser.add_argument("--variants", default=",".join(f"{k}:{v}" for k, v in VARIANTS))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind")
    parser.add_argument("--variant")
    parser.add_argument("--root")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--pattern")
    arguments = parser.parse_args()
    if arguments.child:
        child(arguments)
        return
    print("| format | variant | stream | rows | s/micro-batch (median) | peak RSS MiB | ratio |")
    print("|---|---|---|---|---|---|---|")
    for pattern in arguments.patterns.split(","):
        for variant_text in arguments.variants.split(","):
            kind, variant = variant_text.split(":")
            results = {}
            for rows in (arguments.small, arguments.large):
                with tempfile.TemporaryDirectory(prefix="pgshovel-bench-") as directory:
                    build(kind, Path(directory), rows)
                    command = [
                        sys.executable,
                        "-m",
                        "bench.table_formats",
                        "--child",
                        "--kind",
                        kind,
                        "--variant",
                        variant,
                        "--root",
                        directory,
                        "--rows",
                        str(rows),
                        "--batches",
                        str(arguments.batches),
                        "--pattern",
                        pattern,
                    ]
                    output = subprocess.run(command, capture_output=True, text=True)
                    if output.returncode != 0:  # a benchmark reports, it never fails
                        print(
                            f"| {kind} | {variant} | {pattern} | {rows:,} | not measured: "
                            f"{output.stderr.strip().splitlines()[-1:]} | | |",
                            flush=True,
                        )
                        continue
                    results[rows] = json.loads(output.stdout.splitlines()[-1])
            if arguments.small not in results:
                continue
            small = statistics.median(results[arguments.small]["seconds"])
            for rows, result in results.items():
                median = statistics.median(result["seconds"])
                print(
                    f"| {kind} | {variant} | {pattern} | {rows:,} | {median:.3f} | "
                    f"{result['peak_mib']:.0f} | {median / small:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
