"""The contracts between components (``typing.Protocol``).

Components named in YAML (``path: module:Name``) must satisfy one of these;
``pgshovel.components.build`` checks it when the configuration is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pgshovel.protocol import stream_pb2


@runtime_checkable
class StreamWriter(Protocol):
    """Where the relay publishes.

    ``push`` hands messages over for delivery in the order given; it may return
    before they are acknowledged, and raises ``RelayError`` when delivery is
    already known to have failed. ``flush`` returns only when every message
    pushed so far is durably acknowledged, in order, and raises ``RelayError``
    when that cannot be guaranteed. The relay calls ``pgq.finish_batch`` only
    after ``flush`` returned for the whole batch (one flush per batch).
    """

    def push(self, messages: Sequence[stream_pb2.Message]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
