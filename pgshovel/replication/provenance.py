"""Who made a mutation, as the targets record it: the protocol's ``Provenance`` with gaps as None.

A table captured with provenance stamps each mutation with the session that
made it (``Mutation.provenance``); a mutation of a table captured without it
has no provenance at all. The protocol writes "not available" as an empty
string or 0 (a Unix-socket client has no address, ``compute_query_id`` may be
off); the targets write it as NULL, so a NULL always means "not known" and
never a value. Pure: no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from pgshovel.protocol import stream_pb2

__all__ = ["FIELDS", "Stamp", "stamp_of"]


class Stamp(NamedTuple):
    """One mutation's provenance, each part None when the source did not know it."""

    current_user: str | None
    session_user: str | None
    application_name: str | None
    client_addr: str | None
    query_id: int | None
    annotation: str | None


#: The parts in order, as the protocol and the Parquet change log name them.
FIELDS: tuple[str, ...] = Stamp._fields


def stamp_of(mutation: stream_pb2.Mutation) -> Stamp | None:
    """The provenance of ``mutation`` (None when its table is captured without provenance)."""
    if not mutation.HasField("provenance"):
        return None
    provenance = mutation.provenance
    return Stamp(
        provenance.current_user or None,
        provenance.session_user or None,
        provenance.application_name or None,
        provenance.client_addr or None,
        provenance.query_id or None,
        provenance.annotation or None,
    )
