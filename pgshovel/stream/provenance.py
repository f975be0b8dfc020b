"""A transaction's provenance, carried once per batch: resolving ``Mutation.provenance_of``.

The relay writes a transaction's provenance in full on the first mutation that
has it in a batch and, on every later mutation of that transaction with the
same provenance, only ``provenance_of``: the id of that first mutation (a
200 KB ``pgshovel.annotation`` on a 3,000-row UPDATE is sent once, not 3,000
times). A reader that follows the batch in order resolves each reference by
copying the carrier's ``Provenance`` into the mutation, so everything after it
(targets, ``set tail``) sees every mutation's provenance as before. The
stream validator does this for every reader of pgshovel's; the carriers are
forgotten at each batch's Begin and when a batch is abandoned. Pure: no I/O.
"""

from __future__ import annotations

from pgshovel.protocol import stream_pb2

__all__ = ["ProvenanceResolver"]


class ProvenanceResolver:
    """Resolves the provenance references of one batch's mutations, fed in stream order."""

    __slots__ = ("_carriers",)

    def __init__(self) -> None:
        self._carriers: dict[int, stream_pb2.Provenance] = {}

    def reset(self) -> None:
        """A batch begins (or is abandoned): references never reach back past it."""
        if self._carriers:
            self._carriers = {}

    def resolve(self, mutation: stream_pb2.Mutation) -> str:
        """Give ``mutation`` its provenance in full; "" when that worked, else the problem
        (a reference to a mutation the batch did not carry before it)."""
        reference = mutation.provenance_of
        if reference:
            carrier = self._carriers.get(reference)
            if carrier is None:
                return (
                    f"mutation {mutation.id!r} takes the provenance of mutation {reference!r}, "
                    "which its batch did not carry before it"
                )
            mutation.provenance.CopyFrom(carrier)
            mutation.ClearField("provenance_of")
        elif mutation.HasField("provenance"):
            self._carriers[mutation.id] = mutation.provenance
        return ""
