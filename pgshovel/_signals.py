"""The same two-stage stop in every long-running process.

The first SIGINT or SIGTERM asks the process to stop after the step in
progress (the relay finishes or abandons its batch, the worker applies its
micro-batch): nothing is left half done. A second SIGINT exits at once with
status 130, for an operator who does not want to wait; what was not committed
is redone by the next start.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType

logger = logging.getLogger(__name__)

EXIT_AT_ONCE = 130


class StopRequest:
    """An event set by the first stop signal; callable as ``should_stop()``."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self) -> bool:
        return self.event.is_set()

    def install(self) -> None:
        """Handle SIGINT and SIGTERM (call from the main thread)."""
        signal.signal(signal.SIGINT, self.handle)
        signal.signal(signal.SIGTERM, self.handle)

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            logger.warning("second interrupt: exiting at once")
            os._exit(EXIT_AT_ONCE)
        logger.info("signal %d: stopping after the step in progress", signum)
        self.event.set()
