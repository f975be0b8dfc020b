"""``set tail``: read a set's topic, validate it, print committed mutations as JSON lines.

By default it prints what the topic holds now and stops; ``--follow`` keeps
waiting for new batches. Starting anywhere but a Begin, the validator skips to
the first whole batch, so what is printed is always committed and complete.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from pgshovel.stream.jsonlines import json_lines
from pgshovel.stream.reader import KafkaReader
from pgshovel.stream.validation import StreamValidator

READ_BATCH = 5000


def tail(
    bootstrap_servers: str,
    topic: str,
    properties: Mapping[str, str],
    emit: Callable[[str], None],
    offset: int | None = None,
    follow: bool = False,
    limit: int | None = None,
    poll: float = 0.5,
) -> int:
    """Print the committed mutations of ``topic``; returns how many were printed."""
    reader = KafkaReader(bootstrap_servers, topic, properties)
    printed = 0
    try:
        low, high = reader.watermarks()
        start = low if offset is None else offset
        reader.seek(start)
        validator = StreamValidator()
        position = start
        while True:
            if not follow and position >= high:
                break
            messages = reader.read(READ_BATCH, poll)
            if not messages:
                if not follow:
                    # Nothing arrived: the end may have moved (or not); check again.
                    high = reader.watermarks()[1]
                    if position >= high:
                        break
                    time.sleep(poll)
                continue
            position = messages[-1][0] + 1
            for batch in validator.validate(messages):
                for line in json_lines(batch):
                    emit(line)
                    printed += 1
                    if limit is not None and printed >= limit:
                        return printed
    finally:
        reader.close()
    return printed
