"""The snapshot-to-stream handoff: which streamed mutations the loaded snapshot already holds.

The loader records ``txid_current_snapshot()`` in the transaction whose exported
snapshot it copies, and the stream starts from the position at the topic's end
noted before that. A streamed mutation whose transaction is visible in the snapshot is
already in the target and must be dropped; the others are applied. A
``HandoffFilter`` does that batch by batch and switches itself off for good at
the first batch whose start tick's xmin is at or past the snapshot's xmax: every
transaction of such a batch started after the snapshot was taken, and so does
every later one. TRUNCATE follows the same rule as row changes (a truncate that
the snapshot saw is already reflected in the copied rows). A batch left with no
mutation is still returned, so that its position is stored and the stream moves
on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch

__all__ = ["HandoffFilter", "Snapshot", "is_visible", "parse_txid_snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """A PostgreSQL transaction snapshot: xmin, xmax and the transactions in progress."""

    xmin: int
    xmax: int
    xip: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if not 0 < self.xmin <= self.xmax:
            raise ValueError(
                f"snapshot needs 0 < xmin <= xmax, got xmin {self.xmin!r} and xmax {self.xmax!r}"
            )
        outside = sorted(txid for txid in self.xip if not self.xmin <= txid < self.xmax)
        if outside:
            raise ValueError(
                f"snapshot in-progress transactions must lie in [xmin, xmax) = "
                f"[{self.xmin!r}, {self.xmax!r}), got {outside!r}"
            )

    @classmethod
    def from_protobuf(cls, snapshot: stream_pb2.Snapshot) -> Snapshot:
        """The snapshot carried by a PgQ tick on the stream."""
        return cls(snapshot.xmin, snapshot.xmax, frozenset(snapshot.xip))

    def to_text(self) -> str:
        """PostgreSQL's text form, ``xmin:xmax:xip1,xip2``, in-progress ids ascending."""
        return f"{self.xmin}:{self.xmax}:{','.join(str(txid) for txid in sorted(self.xip))}"


def parse_txid_snapshot(text: str) -> Snapshot:
    """Parse PostgreSQL's ``txid_snapshot`` / ``pg_snapshot`` text, e.g. ``'10:20:12,15'``."""
    parts = text.strip().split(":")
    try:
        if len(parts) != 3:
            raise ValueError("expected three fields separated by ':'")
        xmin, xmax = int(parts[0]), int(parts[1])
        xip = frozenset(int(txid) for txid in parts[2].split(",")) if parts[2] else frozenset()
        return Snapshot(xmin, xmax, xip)
    except ValueError as error:
        raise StreamError(
            f"cannot parse transaction snapshot {text!r}: {error}; expected PostgreSQL's "
            "'xmin:xmax:xip,...' text as returned by txid_current_snapshot()"
        ) from error


def is_visible(txid: int, snapshot: Snapshot) -> bool:
    """Whether transaction ``txid`` had committed when ``snapshot`` was taken.

    Only meaningful for committed transactions, which every streamed mutation's is.
    """
    if txid < snapshot.xmin:
        return True
    if txid >= snapshot.xmax:
        return False
    return txid not in snapshot.xip


class HandoffFilter:
    """Drops the streamed mutations that a loaded snapshot already contains."""

    __slots__ = ("_active", "_snapshot")

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._active = True

    @property
    def active(self) -> bool:
        """False once no later mutation can be visible in the snapshot."""
        return self._active

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def filter(self, batch: CommittedBatch) -> CommittedBatch:
        """The batch without the mutations visible in the snapshot (maybe without any)."""
        if not self._active:
            return batch
        start = batch.begin.start
        if start.HasField("snapshot") and start.snapshot.xmin >= self._snapshot.xmax:
            self._active = False
            return batch
        snapshot = self._snapshot
        kept = []
        # kept_before[i]: how many of the first i mutations are kept (marker positions move).
        kept_before = [0]
        for mutation in batch.mutations:
            txid = mutation.transaction
            if txid == 0:
                raise StreamError(
                    f"mutation {mutation.id!r} on {mutation.schema!r}.{mutation.table!r} in batch "
                    f"{batch.batch_id!r} (offset {batch.offset!r}) has no transaction id; "
                    "the handoff cannot tell whether the loaded snapshot holds it; "
                    "the relay that wrote it is too old or broken"
                )
            if not is_visible(txid, snapshot):
                kept.append(mutation)
            kept_before.append(len(kept))
        markers = tuple(
            (kept_before[position], marker)
            for position, marker in batch.markers
            # A schema change the snapshot saw is in the shapes it was loaded with.
            if not (
                isinstance(marker, stream_pb2.SchemaChange)
                and is_visible(marker.transaction, snapshot)
            )
        )
        if len(kept) == len(batch.mutations) and len(markers) == len(batch.markers):
            return batch
        return dataclasses.replace(batch, mutations=tuple(kept), markers=markers)
