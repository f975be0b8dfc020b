"""The one table of mutation operations: protocol values, their names, the trigger's letters."""

from __future__ import annotations

from pgshovel.protocol import stream_pb2

Mutation = stream_pb2.Mutation

#: Protocol operation -> its name (what people, logs and change logs see).
OPERATION_NAMES: dict[stream_pb2.Mutation.Operation, str] = {
    Mutation.INSERT: "INSERT",
    Mutation.UPDATE: "UPDATE",
    Mutation.DELETE: "DELETE",
    Mutation.TRUNCATE: "TRUNCATE",
}

#: The capture trigger's ``ev_type`` letter -> protocol operation (see sql/capture.sql).
EVENT_TYPES: dict[str, stream_pb2.Mutation.Operation] = {
    "I": Mutation.INSERT,
    "U": Mutation.UPDATE,
    "D": Mutation.DELETE,
    "T": Mutation.TRUNCATE,
}
