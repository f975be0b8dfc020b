"""Kafka client properties from configuration files, as librdkafka takes them.

One rule for every place pgshovel hands properties to librdkafka (the relay's
producer, the worker's and ``set tail``'s consumer): a property whose value is
empty (``""``, also after ``${VAR:-}`` expansion, or YAML null) is left out,
so librdkafka keeps its own default. A configuration can then name a property
that only some brokers need, such as ``api.version.request:
${PGSHOVEL_KAFKA_API_VERSION_REQUEST:-}`` for a Kafka older than 0.10, and a
modern broker's clients never see it (nor print librdkafka's deprecation
warnings for it). Booleans become ``true``/``false``, everything else its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["client_properties"]


def client_properties(properties: Mapping[str, Any]) -> dict[str, str]:
    """``properties`` as librdkafka strings, without the ones whose value is empty."""
    settings: dict[str, str] = {}
    for key, value in properties.items():
        if value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if text.strip():
            settings[str(key)] = text
    return settings
