"""What a long-running process does when a step fails: the one place ``on_error`` is applied.

The relay and the worker run their work as steps (publish batches, apply
micro-batches) inside a retry loop that hands every failure to
``ErrorPolicy.failed``, which either returns after waiting (the step is then
retried from its last durable point: nothing is dropped) or raises (the
process ends with a one-line reason):

* ``TransientError`` (a connection lost or refused, a server restarting, a
  broker or ZooKeeper unavailable) is always retried, with exponential backoff
  and jitter capped at ``max_backoff``; an outage is logged once when it starts
  and once when it ends, never once per attempt;
* ``DataError`` follows ``on_error``: ``exit`` raises, ``log`` logs loudly and
  retries after ``retry_interval``;
* anything else (configuration, programming errors) raises.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

import tenacity

from pgshovel.errors import DataError, PgshovelError, TransientError

OnError = Literal["exit", "log"]


@dataclass
class _Attempt:
    """The part of tenacity's retry state its wait strategies read."""

    attempt_number: int


class ErrorPolicy:
    """Decides, for one process, whether a failed step is retried and how long to wait first.

    ``sleep(seconds)`` waits between attempts and should return early when the
    process is asked to stop (``threading.Event.wait`` does).
    """

    def __init__(
        self,
        on_error: OnError,
        sleep: Callable[[float], object],
        logger: logging.Logger,
        *,
        retry_interval: float = 2.0,
        max_backoff: float = 30.0,
    ) -> None:
        self.on_error = on_error
        self.sleep = sleep
        self.logger = logger
        self.retry_interval = retry_interval
        # 0.2 s plus "full jitter": a random wait up to min(max_backoff, 0.5 s * 2^attempt).
        self._wait = tenacity.wait_fixed(min(0.2, max_backoff)) + tenacity.wait_random_exponential(
            multiplier=0.5, max=max_backoff
        )
        self._outage_started: float | None = None
        self._attempts = 0
        self.failures = 0

    @property
    def in_outage(self) -> bool:
        """Whether the last step failed with a transient error and none succeeded since."""
        return self._outage_started is not None

    def failed(self, error: PgshovelError) -> None:
        """Wait before the step is retried, or raise ``error`` when the process must end."""
        self.failures += 1
        if isinstance(error, TransientError):
            self._attempts += 1
            if self._outage_started is None:
                self._outage_started = time.monotonic()
                self.logger.warning("%s; retrying with backoff until it is back", error)
            else:
                self.logger.debug("still failing (attempt %d): %s", self._attempts, error)
            self.sleep(self._wait(cast(tenacity.RetryCallState, _Attempt(self._attempts))))
            return
        if isinstance(error, DataError) and self.on_error == "log":
            self.logger.error(
                "%s (on_error: log; retrying in %.1fs, nothing is skipped)",
                error,
                self.retry_interval,
            )
            self.sleep(self.retry_interval)
            return
        raise error

    def succeeded(self) -> None:
        """A step went through: end the outage in progress, if any, with one log line."""
        if self._outage_started is not None:
            seconds = time.monotonic() - self._outage_started
            self.logger.warning("recovered after %.1fs and %d attempt(s)", seconds, self._attempts)
            self._outage_started = None
            self._attempts = 0
