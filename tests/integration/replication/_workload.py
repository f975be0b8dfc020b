"""A seeded random workload on the "Items" test table, recorded as stream batches."""

from __future__ import annotations

import random

from pgshovel.protocol import stream_pb2
from pgshovel.stream.publisher import Publisher

from ._recording import RecordingSource

ITEMS = ("public", "Items")
ITEMS_DDL = """
CREATE TABLE "Items" ("Id" integer, sub text, payload text, amount numeric,
                      at timestamptz, tags integer[], PRIMARY KEY ("Id", sub));
INSERT INTO "Items" SELECT i, 's' || (i % 3), 'p' || i, i * 1.5, now(), array[i]
FROM generate_series(1, 200) AS i;
"""


def random_items_stream(
    recorder: RecordingSource,
    publisher: Publisher,
    batches: int,
    per_batch: int,
    seed: int,
    truncate_at: int | None = None,
) -> tuple[list[stream_pb2.Message], int]:
    """Run the workload on the source; return its messages and how many mutations they hold."""
    rng = random.Random(seed)
    live = {(i, f"s{i % 3}") for i in range(1, 201)}
    next_id = 10_000
    messages: list[stream_pb2.Message] = []
    mutations = 0
    for batch in range(batches):
        if batch == truncate_at:
            recorder.truncate(ITEMS)
            live.clear()
            mutations += 1
        for _ in range(per_batch):
            choice = rng.random()
            if choice < 0.35 or not live:
                next_id += 1
                key = (next_id, rng.choice("xyz"))
                recorder.change(
                    ITEMS,
                    'INSERT INTO "Items" VALUES (%s, %s, %s, %s, now(), %s)',
                    (*key, f"p{next_id}", rng.randint(-(10**6), 10**6) / 100, [next_id, None]),
                    new_key=(str(key[0]), key[1]),
                )
                live.add(key)
            else:
                old = rng.choice(sorted(live))
                old_key = (str(old[0]), old[1])
                if choice < 0.55:
                    recorder.change(
                        ITEMS,
                        'DELETE FROM "Items" WHERE ("Id", sub) = (%s, %s)',
                        old,
                        old_key=old_key,
                    )
                    live.remove(old)
                else:
                    new = old
                    if choice > 0.85:
                        next_id += 1
                        new = (next_id, old[1])
                    recorder.change(
                        ITEMS,
                        'UPDATE "Items" SET "Id" = %s, payload = payload || %s, amount = %s '
                        'WHERE ("Id", sub) = (%s, %s)',
                        (new[0], "+", rng.random(), *old),
                        old_key=old_key,
                        new_key=(str(new[0]), new[1]),
                    )
                    live.remove(old)
                    live.add(new)
            mutations += 1
        messages += recorder.commit().frame(publisher)
    return messages, mutations
