"""``set tail``: read a set's topic, validate it, print committed mutations as JSON lines.

By default it prints what the topic holds now and stops; ``--follow`` keeps
waiting for new batches; ``--latest`` starts at the topic's end (with
``--follow``: only what arrives from now on). Starting anywhere but a Begin, the
validator skips to the first whole batch, so what is printed is always
committed and complete. ``--format pgshovel`` prints pgshovel's records
(``pgshovel.stream.jsonlines``); ``--format debezium`` prints each change as
the Debezium envelope a table topic would carry (``pgshovel.relay.table_topics``),
a key change as a ``d`` then a ``c`` event and a TRUNCATE as Debezium's ``t``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Literal

from pgshovel.protocol import stream_pb2
from pgshovel.relay.table_topics import TableTopicTranslator
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.jsonlines import json_lines
from pgshovel.stream.reader import KafkaReader
from pgshovel.stream.validation import StreamValidator

READ_BATCH = 5000

TailFormat = Literal["pgshovel", "debezium"]


def debezium_lines(batch: CommittedBatch, translator: TableTopicTranslator) -> Iterator[str]:
    """The batch's changes as Debezium envelopes, one per line (tombstones left out)."""
    translator.begin(batch.batch_id)
    for mutation in batch.mutations:
        if mutation.operation == stream_pb2.Mutation.TRUNCATE:
            yield translator.truncate_event(mutation).decode("utf-8")
            continue
        for record in translator.translate(mutation):
            if record.value is not None:
                yield record.value.decode("utf-8")


def tail(
    bootstrap_servers: str,
    topic: str,
    properties: Mapping[str, str],
    emit: Callable[[str], None],
    offset: int | None = None,
    follow: bool = False,
    limit: int | None = None,
    poll: float = 0.5,
    format: TailFormat = "pgshovel",
    latest: bool = False,
) -> int:
    """Print the committed mutations of ``topic``; returns how many lines were printed."""
    reader = KafkaReader(bootstrap_servers, topic, properties)
    translator = TableTopicTranslator("", "debezium", name=topic)
    lines: Callable[[CommittedBatch], Iterator[str]] = (
        json_lines if format == "pgshovel" else lambda batch: debezium_lines(batch, translator)
    )
    printed = 0
    try:
        low, high = reader.watermarks()
        start = high if latest else low if offset is None else offset
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
                for line in lines(batch):
                    emit(line)
                    printed += 1
                    if limit is not None and printed >= limit:
                        return printed
    finally:
        reader.close()
    return printed
