"""One measurement of the table_formats group in a fresh process (``python -m bench._tf_child``).

``apply``: open the worker's target of a kind on a loaded table, plan the
stream's micro-batches first, reset this process's peak RSS, then time each
``target.apply``; prints one JSON line with the seconds of each micro-batch,
the mutations applied and the peak RSS (MiB) while applying. ``upkeep``: the
same target with maintenance on, micro-batches applied for a given number of
seconds, the table's data files counted after each commit; prints the counts
and when they were taken. A fresh process per measurement keeps what one
table size left in the heap out of the other's peak.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from bench import _proc, _tf_work

MIB = 1 << 20


def apply(arguments: argparse.Namespace) -> dict[str, object]:
    maker = _tf_work.StreamMaker(arguments.rows, arguments.changes)
    plans = list(maker.plans(arguments.batches))
    target = _tf_work.make_target(arguments.kind, arguments.where)
    seconds: list[float] = []
    mutations = 0
    pid = os.getpid()
    try:
        target.open(_tf_work.CLUSTER, _tf_work.SET)
        _proc.reset_peak([pid])
        for plan, state in plans:
            started = time.perf_counter()
            target.apply(plan, state)
            seconds.append(time.perf_counter() - started)
            mutations += sum(len(changes.batch.mutations) for changes in plan.batches)
        peak = _proc.usage([pid]).peak_rss / MIB
        held = _tf_work.row_count(arguments.kind, target)
        if held != maker.expected:
            raise RuntimeError(
                f"the {arguments.kind} copy holds {held} rows after the stream, the source "
                f"{maker.expected}: the run is not valid"
            )
    finally:
        target.close()
    return {"seconds": seconds, "mutations": mutations, "peak_mib": peak}


def upkeep(arguments: argparse.Namespace) -> dict[str, object]:
    maker = _tf_work.StreamMaker(arguments.rows, arguments.changes)
    target = _tf_work.make_target(
        arguments.kind,
        arguments.where,
        maintenance=True,
        max_small_files=arguments.max_small_files,
    )
    files: list[int] = []
    at: list[float] = []
    started = time.monotonic()
    number = 0
    try:
        target.open(_tf_work.CLUSTER, _tf_work.SET)
        while time.monotonic() - started < arguments.seconds:
            number += 1
            plan, state = next(maker.plans(1, first=number))
            target.apply(plan, state)
            files.append(_tf_work.data_files(arguments.kind, target))
            at.append(round(time.monotonic() - started, 2))
    finally:
        target.close()
    return {"files": files, "at": at, "micro_batches": number}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._tf_child")
    parser.add_argument("job", choices=("apply", "upkeep"))
    parser.add_argument("--kind", required=True, choices=(*_tf_work.KINDS, "postgresql"))
    parser.add_argument("--where", required=True, help="directory, or DSN for postgresql")
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--changes", type=int, required=True)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--max-small-files", type=int, default=16)
    arguments = parser.parse_args(argv)
    result = apply(arguments) if arguments.job == "apply" else upkeep(arguments)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    # Skip the interpreter's teardown: after the work is done and printed, a delta-rs runtime
    # thread sometimes aborts it ("terminate called without an active exception", status
    # 134), which would discard a valid measurement.
    os._exit(status)
