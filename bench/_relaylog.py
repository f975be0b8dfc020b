"""Reading the relay's per-batch log lines (pure): events, bytes and seconds of each batch.

The relay logs one INFO line per finished batch, ``batch 7: 200000 events,
41000000 bytes, 3.120s, lag 0.100s``; the seconds cover taking the batch,
reading and framing its events, Kafka's acknowledgement and ``finish_batch``.
Newer relays add where that time went, ``(reading 1.2s, decoding 1.5s, kafka
0.4s)``: waiting for rows from PostgreSQL, decoding and framing them, and
handing them to Kafka until acknowledged (older lines read as zeros).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BATCH = re.compile(
    r"batch (\d+): (\d+) events, (\d+) bytes, ([0-9.]+)s, lag ([0-9.]+)s"
    r"(?: \(reading ([0-9.]+)s, decoding ([0-9.]+)s, kafka ([0-9.]+)s\))?"
)


@dataclass(frozen=True)
class BatchLine:
    batch: int
    events: int
    bytes: int
    seconds: float
    lag: float
    reading: float = 0.0
    decoding: float = 0.0
    kafka: float = 0.0


def batch_lines(text: str) -> list[BatchLine]:
    """Every batch line of a relay log, in order."""
    return [
        BatchLine(
            int(m[1]),
            int(m[2]),
            int(m[3]),
            float(m[4]),
            float(m[5]),
            *(float(part or 0) for part in m.groups()[5:]),
        )
        for m in _BATCH.finditer(text)
    ]


def throughput(lines: list[BatchLine]) -> tuple[int, float]:
    """(events, seconds) of the batches that carried events (empty ticks are not work)."""
    busy = [line for line in lines if line.events > 0]
    return sum(line.events for line in busy), sum(line.seconds for line in busy)


def time_split(lines: list[BatchLine]) -> tuple[float, float, float]:
    """Seconds spent reading, decoding and in Kafka over the batches that carried events."""
    busy = [line for line in lines if line.events > 0]
    return (
        sum(line.reading for line in busy),
        sum(line.decoding for line in busy),
        sum(line.kafka for line in busy),
    )
