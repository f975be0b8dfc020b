"""A process's last hour for its status document: (time, lag, rate) samples and its last errors.

Relay and worker observe their lag and one counter (events published,
mutations applied) each time they write their status node (at most every
second). Every ``interval`` seconds the observations close into one sample:
the time it ends, the highest lag observed in it (a spike between two samples
still shows), and the counter's rate over it. ``capacity`` samples are kept
(360 of 10 s: one hour), the oldest dropped, so the document stays bounded
(about 12 KB of JSON) and a console shows the hour before it started. The
sample still open is shown too, so a new process has a point at once.
``RecentErrors`` keeps the last few failures with their time. Pure: the caller
passes the clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

INTERVAL_SECONDS = 10.0
CAPACITY = 360
ERRORS_KEPT = 10
#: an error's text is cut to this many characters in the document
ERROR_CHARACTERS = 500

#: (end time in epoch seconds, highest lag in seconds, rate per second)
Sample = tuple[float, float, float]


@dataclass
class History:
    """A ring of samples of one process's lag and throughput."""

    interval: float = INTERVAL_SECONDS
    capacity: int = CAPACITY
    samples: deque[Sample] = field(default_factory=deque)
    #: the open sample: when it began, the counter then, its highest lag
    _start: float | None = None
    _start_total: float = 0.0
    _peak: float = 0.0
    #: the last observation (time, counter)
    _last: tuple[float, float] | None = None

    def observe(self, now: float, lag: float, total: float) -> None:
        """Note the lag and the counter's value at ``now`` (epoch seconds)."""
        if self._start is None or now < self._start:
            # The first observation, or the clock went back: start a new sample here.
            self._start, self._start_total, self._peak = now, total, lag
            self._last = (now, total)
            return
        self._peak = max(self._peak, lag)
        self._last = (now, total)
        if now - self._start >= self.interval:
            self.samples.append(self._sample(self._start, now, total))
            while len(self.samples) > self.capacity:
                self.samples.popleft()
            self._start, self._start_total, self._peak = now, total, lag

    def _sample(self, start: float, end: float, total: float) -> Sample:
        elapsed = end - start
        # A counter that went down (a restarted count) gives no negative rate.
        rate = max(0.0, total - self._start_total) / elapsed if elapsed > 0 else 0.0
        return (round(end, 3), round(self._peak, 3), round(rate, 3))

    def points(self) -> list[Sample]:
        """The closed samples, then the open one when anything was observed after it began."""
        points = list(self.samples)
        if self._last is not None and self._start is not None and self._last[0] > self._start:
            points.append(self._sample(self._start, *self._last))
        return points

    def document(self) -> dict[str, Any]:
        """``{"interval": seconds, "samples": [[time, lag, rate], ...]}`` (oldest first)."""
        return {"interval": self.interval, "samples": [list(point) for point in self.points()]}


@dataclass
class RecentErrors:
    """The last ``kept`` errors of a process, with when they happened."""

    kept: int = ERRORS_KEPT
    entries: deque[tuple[float, str]] = field(default_factory=deque)

    def record(self, now: float, message: str) -> None:
        text = " ".join(message.split())
        if len(text) > ERROR_CHARACTERS:
            text = text[: ERROR_CHARACTERS - 1] + "…"
        self.entries.append((round(now, 3), text))
        while len(self.entries) > self.kept:
            self.entries.popleft()

    def document(self) -> list[dict[str, Any]]:
        """``[{"time": epoch seconds, "message": text}, ...]``, the newest last."""
        # tuple() copies in one step: another thread may record meanwhile.
        return [{"time": when, "message": text} for when, text in tuple(self.entries)]
