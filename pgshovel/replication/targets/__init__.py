"""Replication targets: PostgreSQL (``postgresql:PostgresTarget``), Parquet (``parquet``).

``copy_name`` is how every report names the copy a target holds (``set verify``,
``set inspect``, the worker's metrics): the target's ``copy_name`` when it has
one (``postgresql:host:port/db``, ``parquet:/path``), else its class.
"""

from __future__ import annotations


def copy_name(target: object) -> str:
    """The name of the copy ``target`` holds, for reports (never a secret)."""
    name = getattr(target, "copy_name", None)
    return str(name) if name else type(target).__name__
