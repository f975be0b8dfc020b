"""What an incremental snapshot keeps per chunk in flight, per verified range and per task.

A ``Flight`` is one chunk being read and what the stream did to its table
meanwhile: the keys it changed (a keyed table) or its mutations themselves (an
unkeyed table, whose rows no key names), of which ``replay`` picks those the
read's snapshot did not see. A ``Verdict`` gathers a verify range's
comparisons until every bucket was compared once; ``Progress`` the rows and
time of a task, for its log lines.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from pgshovel.abc import Comparison
from pgshovel.protocol import stream_pb2
from pgshovel.source import Chunk, StagedChunk
from pgshovel.stream.handoff import is_visible, parse_txid_snapshot


@dataclass
class Flight:
    """One chunk being read, and what the stream did to its table meanwhile."""

    chunk: Chunk
    task: str
    index: int
    future: Future[StagedChunk]
    opened: bool = False
    ready: bool = False
    invalid: str = ""
    changed: set[tuple[str | None, ...]] = field(default_factory=set)
    #: an unkeyed table's mutations from the low watermark's batch on, in stream order
    mutations: list[stream_pb2.Mutation] = field(default_factory=list)

    def replay(self, staged: StagedChunk) -> Sequence[stream_pb2.Mutation]:
        """The mutations the read did not see (their transactions are not visible in its
        snapshot): what the staged rows of an unkeyed table lack."""
        if not self.mutations:
            return ()
        snapshot = parse_txid_snapshot(staged.snapshot)
        return [m for m in self.mutations if not is_visible(m.transaction, snapshot)]


@dataclass
class Verdict:
    """A verify range's buckets over its comparisons: each compared once is enough."""

    attempts: int = 0
    equal: set[int] = field(default_factory=set)
    differing: dict[int, tuple[int, int]] = field(default_factory=dict)
    skipped: set[int] = field(default_factory=set)

    def add(self, comparison: Comparison) -> None:
        self.attempts += 1
        self.equal |= comparison.equal
        for bucket, counts in comparison.differing.items():
            self.differing.setdefault(bucket, counts)
        self.skipped |= comparison.skipped

    @property
    def pending(self) -> set[int]:
        return self.skipped - self.equal - set(self.differing)


@dataclass
class Progress:
    """Rows and time of one task, for the log line after each chunk."""

    started: float = field(default_factory=time.monotonic)
    rows: int = 0
