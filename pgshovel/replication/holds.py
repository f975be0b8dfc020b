"""Test-only: hold the worker at a named point of its snapshot load while a file exists.

``PGSHOVEL_TEST_HOLD_DIR`` names a directory. At each point of the initial load
(``before-export``: about to note the topic's end offset and export the
snapshot; ``after-export``: the snapshot is exported, the set not read yet;
``loading``: the load is recorded, its ranges not copied yet) the worker waits
while a file of that name exists in the directory, logging once when it starts
and once when it goes on. End-to-end tests use it to run ``set update`` at
exactly those moments instead of hoping to hit them. It is not a setting:
unset, as outside tests, it costs one environment lookup per point.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

logger = logging.getLogger(__name__)

VARIABLE = "PGSHOVEL_TEST_HOLD_DIR"

Point = Literal["before-export", "after-export", "loading"]


def hold(point: Point, should_stop: Callable[[], bool]) -> None:
    """Wait while ``$PGSHOVEL_TEST_HOLD_DIR/<point>`` exists (or until ``should_stop()``)."""
    directory = os.environ.get(VARIABLE)
    if not directory:
        return
    path = Path(directory) / point
    if not path.exists():
        return
    logger.warning("test hold: waiting at %s while %s exists", point, path)
    while path.exists() and not should_stop():
        time.sleep(0.1)
    logger.warning("test hold: going on from %s", point)
