"""The options of ``spark.read(Stream).format("pgshovel")``, read and checked once on the driver.

A source names the set topic's Kafka cluster (``kafka.bootstrap.servers``;
every other ``kafka.``-prefixed option is a librdkafka property of the readers,
e.g. ``kafka.security.protocol``) and the set topic (``topic``: the name the
relay writes, ``cluster.set`` unless the set's configuration names another, see
``pgshovel.cluster.names.topic_name``). ``startingPosition`` says where a new
query (or a bounded read) starts: ``earliest`` (default), ``latest`` or a
position document a query reported (its JSON offset); ``endingPosition`` bounds
``spark.read``: ``latest`` (default: the last complete batch when the read is
planned) or a position document. ``maxMutationsPerTrigger`` caps a streaming
micro-batch (it still ends on a batch boundary and holds at least one batch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgshovel.errors import ConfigurationError

__all__ = ["KAFKA_PREFIX", "SourceOptions"]

KAFKA_PREFIX = "kafka."
_NAMED = ("earliest", "latest")


@dataclass(frozen=True)
class SourceOptions:
    """What a ``pgshovel`` source reads: where, from where to where, how much per trigger."""

    bootstrap_servers: str
    topic: str
    #: librdkafka properties of the driver's and the tasks' consumers
    properties: tuple[tuple[str, str], ...] = ()
    #: ``earliest``, ``latest`` or an offset document (see ``pgshovel.spark_source.offsets``)
    starting: str | dict[str, Any] = "earliest"
    #: ``latest`` or an offset document (bounded reads only)
    ending: str | dict[str, Any] = "latest"
    max_mutations: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """The options Spark passes (case-insensitive keys); a ``ConfigurationError`` names the
        option that does not read and what it takes."""
        lowered = {str(key).lower(): str(value) for key, value in options.items()}
        bootstrap = lowered.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise ConfigurationError(
                "the pgshovel source needs option 'kafka.bootstrap.servers' (the brokers of the "
                "set topic, e.g. host:9092)"
            )
        topic = lowered.get("topic", "").strip()
        if not topic:
            raise ConfigurationError(
                "the pgshovel source needs option 'topic' (the set topic the relay writes: "
                "'<cluster>.<set>' unless the set names another)"
            )
        properties = tuple(
            sorted(
                (key[len(KAFKA_PREFIX) :], value)
                for key, value in lowered.items()
                if key.startswith(KAFKA_PREFIX) and key != "kafka.bootstrap.servers"
            )
        )
        return cls(
            bootstrap_servers=bootstrap,
            topic=topic,
            properties=properties,
            starting=_position_option(lowered, "startingposition", "earliest", _NAMED),
            ending=_position_option(lowered, "endingposition", "latest", ("latest",)),
            max_mutations=_positive(lowered, "maxmutationspertrigger"),
        )

    def kafka_properties(self) -> dict[str, str]:
        return dict(self.properties)


def _position_option(
    options: Mapping[str, str], name: str, default: str, words: tuple[str, ...]
) -> str | dict[str, Any]:
    text = options.get(name, default).strip()
    if text.lower() in words:
        return text.lower()
    choices = " or ".join(repr(word) for word in words)
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ConfigurationError(
            f"option {name!r} is {text!r}: use {choices} or an offset document (the JSON a "
            "query reports as its offset)"
        ) from error
    if not isinstance(document, dict):
        raise ConfigurationError(
            f"option {name!r} is {text!r}: an offset document is a JSON object"
        )
    return document


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None or not text.strip():
        return None
    try:
        number = int(text)
    except ValueError as error:
        raise ConfigurationError(
            f"option {name!r} is {text!r}: expected a positive number of mutations"
        ) from error
    if number < 1:
        raise ConfigurationError(
            f"option {name!r} is {text!r}: expected a positive number of mutations"
        )
    return number
