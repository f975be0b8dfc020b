"""Random row changes of one keyed table as the relay's ROWS messages, per partition and whole.

``Changes`` plays a source: inserts, updates that keep or move keys (across
partitions too), deletes and TRUNCATE, each with its transaction, timestamp
and (sometimes) provenance; ``micro_batch`` returns, for a number of batches,
each partition's ``(batch ordinal, MutationBatch)`` list as the relay routes
them and the same changes in one partition (what the driver path reads once
joined). ``model`` is the table as the changes leave it: key -> (note, txid).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pgshovel.protocol import stream_pb2
from pgshovel.source import Column, TableShape
from pgshovel.stream.rows import RowsBuilder, copy_line, partition_of

KEYED = TableShape(
    "public",
    "acct",
    (Column("id", "integer", "int4", True, 1), Column("note", "text", "text", False, 2)),
    ("id",),
)
INSERT, UPDATE = stream_pb2.Mutation.INSERT, stream_pb2.Mutation.UPDATE
DELETE, TRUNCATE = stream_pb2.Mutation.DELETE, stream_pb2.Mutation.TRUNCATE
NOTES = ["x", "tab\there", "back\\slash", None, "zoë", "\\N", ""]

Messages = list[tuple[int, stream_pb2.MutationBatch]]


def row_table(shape: TableShape) -> bytes:
    entry = stream_pb2.RowTable(set_version="v")
    entry.shape.schema, entry.shape.name = shape.schema, shape.name
    entry.shape.key.extend(shape.key)
    for column in shape.columns:
        entry.shape.columns.add(name=column.name, type_name=column.type_name)
    return entry.SerializeToString()


def _provenance(rng: random.Random) -> bytes | None:
    if rng.random() < 0.5:
        return None
    return stream_pb2.Provenance(
        current_user=rng.choice(["alice", "bob"]), application_name="app", query_id=7
    ).SerializeToString()


@dataclass
class Changes:
    rng: random.Random
    #: key -> (note, txid of the change that wrote it)
    model: dict[int, tuple[str | None, int]] = field(default_factory=dict)
    #: key -> txid of the last change that deleted it (or moved its row to another key)
    deleted_by: dict[int, int] = field(default_factory=dict)
    event: int = 0
    txid: int = 1000
    truncates: int = 0

    def _changes(self) -> list[tuple[int, list[str | None] | None, list[str | None] | None]]:
        rng, model = self.rng, self.model
        out: list[tuple[int, list[str | None] | None, list[str | None] | None]] = []
        for _ in range(rng.randint(1, 15)):
            if rng.random() < 0.04:
                model.clear()
                self.truncates += 1
                out.append((TRUNCATE, None, None))
                continue
            key = rng.randrange(40)
            if key not in model:
                note = rng.choice(NOTES)
                model[key] = (note, self.txid)
                out.append((INSERT, None, [str(key), note]))
                continue
            old: list[str | None] = [str(key), model[key][0]]
            roll = rng.random()
            if roll < 0.3:
                del model[key]
                self.deleted_by[key] = self.txid
                out.append((DELETE, old, None))
                continue
            new_key = key if roll < 0.7 else rng.randrange(40, 80)
            if new_key != key and new_key in model:
                new_key = key
            note = rng.choice(NOTES)
            del model[key]
            if new_key != key:
                self.deleted_by[key] = self.txid
            model[new_key] = (note, self.txid)
            out.append((UPDATE, old, [str(new_key), note]))
        return out

    def micro_batch(self, batches: int, partitions: int) -> tuple[list[Messages], Messages]:
        """Each partition's messages, and the same changes in one partition."""
        parts: list[Messages] = [[] for _ in range(partitions)]
        whole: Messages = []
        table = row_table(KEYED)
        for ordinal in range(batches):
            builders = [RowsBuilder() for _ in range(partitions)]
            single = RowsBuilder()
            for operation, old, new in self._changes():
                self.event += 1
                provenance = _provenance(self.rng)
                if operation == TRUNCATE:
                    targets = set(range(partitions))
                else:
                    targets = {
                        partition_of("public", KEYED.name, (str(values[0]),), partitions)
                        for values in (old, new)
                        if values is not None
                    }
                arguments = (
                    table,
                    self.event,
                    operation,
                    self.txid,
                    1_700_000_000_000_000 + self.event,
                    None if old is None else copy_line(old),
                    None if new is None else copy_line(new),
                    provenance,
                )
                for partition in targets:
                    builders[partition].add(*arguments)
                single.add(*arguments)
            self.txid += 1
            for partition, builder in enumerate(builders):
                payload = builder.take()
                if payload is not None:
                    parts[partition].append((ordinal, stream_pb2.MutationBatch.FromString(payload)))
            payload = single.take()
            if payload is not None:
                whole.append((ordinal, stream_pb2.MutationBatch.FromString(payload)))
        return parts, whole


def cut(rng: random.Random, parts: list[Messages]) -> list[Messages]:
    """Each partition's messages cut into up to three tasks at message boundaries."""
    tasks: list[Messages] = []
    for messages in parts:
        if not messages:
            continue
        cuts = sorted(rng.sample(range(1, len(messages)), max(0, min(2, len(messages) - 1))))
        for start, end in zip([0, *cuts], [*cuts, len(messages)], strict=True):
            tasks.append(messages[start:end])
    return tasks
