"""What a target offers beyond ``Target``, and the worker's errors when it needs what is missing.

The worker asks a target for a capability with ``isinstance`` (the protocols of
``pgshovel.abc`` are runtime-checkable): ``SnapshotTarget`` to load a
consistent snapshot, ``ChunkTarget`` for incremental snapshots (backfill of an
added table, re-snapshot, verify, repair). A target without one is used for
what it offers; when the worker needs a capability it lacks, it stops with one
line saying what it needed, for which set or table, and what to do.
"""

from __future__ import annotations

from pgshovel.abc import TARGET_CAPABILITIES, ChunkTarget, SnapshotTarget, Target
from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.stream.plan import MicroBatchPlan
from pgshovel.stream.state import WorkerState


def describe(target: Target) -> str:
    """The capabilities ``target`` offers beyond ``Target``, for the log."""
    offered = [kind.__name__ for kind in TARGET_CAPABILITIES if isinstance(target, kind)]
    return ", ".join(offered) if offered else "no capability beyond Target"


def snapshot_target(
    target: Target, stored: WorkerState | None, cluster: str, set_name: str
) -> SnapshotTarget:
    """``target`` as a ``SnapshotTarget``; a ``ConfigurationError`` if it cannot load one
    (``stored``: what it holds, None or a load that did not finish)."""
    if isinstance(target, SnapshotTarget):
        return target
    held = "no state" if stored is None else "a snapshot load that did not finish"
    raise ConfigurationError(
        f"target {type(target).__name__} holds {held} for set {set_name!r} of cluster "
        f"{cluster!r} and cannot load a snapshot (it offers no SnapshotTarget capability): "
        "the worker cannot start; configure a target that loads snapshots"
    )


def check_recopy(target: Target, plan: MicroBatchPlan) -> None:
    """Refuse a micro-batch after which a table must be copied again (added to the set, a
    type the target cannot convert) on a target that cannot copy tables chunk by chunk."""
    if not plan.recopy or isinstance(target, ChunkTarget):
        return
    table, reason = plan.recopy[0]
    raise SchemaError(
        f"table {table.qualified!r}: {reason}, so the copy must copy it again while "
        f"streaming, but target {type(target).__name__} cannot copy tables chunk by chunk "
        "(it offers no ChunkTarget capability); reload the target from a fresh snapshot "
        "(remove its stored state and start the worker again)"
    )
