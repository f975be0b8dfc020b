"""librdkafka's log lines in Python logging, its broker-compatibility warnings once per process.

Every Kafka client pgshovel makes logs through a Python logger
(``confluent_kafka``'s ``logger=``), never straight to stderr. librdkafka warns
(``CONFWARN``, some 1,000 characters) about ``api.version.request`` and
``broker.version.fallback`` each time a client is made with them: the
properties a Kafka older than 0.10 needs, such as the sandbox's 0.9 broker. The
first such warning of a process becomes one short line naming them all; the
others go to DEBUG. ``verbose`` (the processes' ``--verbose``) lets every line
through as librdkafka wrote it.
"""

from __future__ import annotations

import logging
import re
import threading

#: the properties a pre-0.10 broker needs, which librdkafka calls deprecated
BROKER_COMPATIBILITY = ("api.version.request", "broker.version.fallback")
_DEPRECATED = re.compile(r"CONFWARN .*Configuration property (\S+) is deprecated")

_lock = threading.Lock()
_warned = False
_verbose = False


def verbose(enabled: bool = True) -> None:
    """Let every librdkafka line through unchanged (``--verbose``)."""
    global _verbose
    _verbose = enabled


class _OncePerProcess(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        global _warned
        if _verbose or record.levelno < logging.WARNING:
            return True
        match = _DEPRECATED.search(record.getMessage())
        if match is None or match.group(1) not in BROKER_COMPATIBILITY:
            return True
        with _lock:
            first, _warned = not _warned, True
        if not first:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        record.msg = (
            "librdkafka calls %s deprecated: they are for Kafka brokers older than 0.10 (as "
            "the sandbox's 0.9); leave them out of the configuration for a newer broker"
        )
        record.args = (" and ".join(BROKER_COMPATIBILITY),)
        return True


_FILTER = _OncePerProcess()


def kafka_logger(name: str) -> logging.Logger:
    """The logger to hand a Kafka client (``logger=``): ``logging.getLogger(name)`` with the
    broker-compatibility filter."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
