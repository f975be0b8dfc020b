"""A process's own way into the source: the set's DSN with the process's ``source_connection``.

The set's DSN (stored in ZooKeeper, without a password) says which database;
``source_connection`` in relay.yml or replication.yml says how this process
logs in, in libpq keywords: ``user=pgshovel_relay
passfile=/etc/pgshovel/relay.pgpass``, ``service=pgshovel_relay``,
``sslcert=...``. Its keywords replace the set's keywords of the same name and
every other keyword of the set stays (libpq then lets explicit keywords win over
a service file's). Pure functions; the result may hold a password, so it is
only ever shown through ``mask_dsn``.
"""

from __future__ import annotations

from typing import Annotated

import psycopg2
from psycopg2.extensions import make_dsn, parse_dsn
from pydantic import AfterValidator, SecretStr
from pydantic_core import PydanticCustomError

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2


def _keywords(dsn: str, what: str) -> dict[str, str]:
    try:
        return dict(parse_dsn(dsn))
    except psycopg2.ProgrammingError as error:
        # psycopg2's message quotes the text, which may hold a password: not shown.
        raise ConfigurationError(
            f"{what} is not a libpq connection string (key=value ... or a postgresql:// URI)"
        ) from error


def source_dsn(set_dsn: str, source_connection: str) -> str:
    """The DSN this process connects with: ``set_dsn`` with ``source_connection``'s keywords."""
    if not source_connection.strip():
        return set_dsn
    keywords = _keywords(set_dsn, "the set's database.dsn")
    keywords.update(_keywords(source_connection, "source_connection"))
    return str(make_dsn(**keywords))


def with_source_connection(
    configuration: configuration_pb2.ReplicationSetConfiguration, source_connection: str
) -> configuration_pb2.ReplicationSetConfiguration:
    """A copy of a set's configuration whose DSN is this process's (``source_dsn``)."""
    if not source_connection.strip():
        return configuration
    copy = configuration_pb2.ReplicationSetConfiguration()
    copy.CopyFrom(configuration)
    copy.database.dsn = source_dsn(configuration.database.dsn, source_connection)
    return copy


def _check(value: SecretStr) -> SecretStr:
    text = value.get_secret_value()
    if text.strip():
        try:
            parse_dsn(text)
        except psycopg2.ProgrammingError:
            raise PydanticCustomError(
                "pgshovel_source_connection",
                "expected libpq keywords such as 'user=NAME passfile=PATH' or 'service=NAME'",
            ) from None
    return value


#: The ``source_connection`` key of relay.yml and replication.yml (never printed).
SourceConnection = Annotated[SecretStr, AfterValidator(_check)]
