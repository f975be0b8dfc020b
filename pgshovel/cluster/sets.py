"""Replication set configuration files: YAML (or protobuf text format) to protobuf.

A set file names the source database and the tables to capture; see
example/set.yml for the documented format. Everything is validated when read:
an invalid file is a ``ConfigurationError`` naming the file, the key and what
is expected. The same checks run on text-format files, and ``to_document``
turns a configuration back into the YAML shape (for ``set inspect``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import text_format
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.versions import set_version
from pgshovel.config_files import expand, load_yaml
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2

DEFAULT_SCHEMA = "public"
TEXT_FORMAT_SUFFIXES = (".txt", ".pbtxt", ".textproto", ".prototxt")

__all__ = [
    "load_set_configuration",
    "parse_set_document",
    "read_set",
    "set_version",
    "to_document",
    "validate_set_configuration",
]

_TOP_KEYS = {"database", "allow_unkeyed", "tables"}
_DATABASE_KEYS = {"dsn"}
_TABLE_KEYS = {"name", "schema", "key_columns", "columns"}


def load_set_configuration(path: Path | str) -> configuration_pb2.ReplicationSetConfiguration:
    """Read and validate a set file: YAML, or protobuf text format by its suffix."""
    path = Path(path)
    if path.suffix in TEXT_FORMAT_SUFFIXES:
        return _load_text_format(path)
    return parse_set_document(load_yaml(path), str(path))


def _load_text_format(path: Path) -> configuration_pb2.ReplicationSetConfiguration:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigurationError(f"{path}: cannot read: {error.strerror}") from error
    configuration = configuration_pb2.ReplicationSetConfiguration()
    try:
        text_format.Parse(text, configuration)
    except text_format.ParseError as error:
        raise ConfigurationError(f"{path}: invalid protobuf text format: {error}") from error
    configuration.database.dsn = expand(configuration.database.dsn, str(path))
    for table in configuration.tables:
        if not table.schema:
            table.schema = DEFAULT_SCHEMA
    validate_set_configuration(configuration, str(path))
    return configuration


def _fail(source: str, key: str, expected: str, value: object) -> ConfigurationError:
    return ConfigurationError(f"{source}: {key}: expected {expected}, got {value!r}")


def _check_keys(source: str, where: str, mapping: dict[Any, Any], allowed: set[str]) -> None:
    unknown = sorted(str(key) for key in mapping if key not in allowed)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ConfigurationError(
            f"{source}: {prefix}{unknown[0]}: unknown key; expected one of {sorted(allowed)}"
        )


def _name(source: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(source, key, "a non-empty string", value)
    return value


def _names(source: str, key: str, value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(source, key, "a list of column names", value)
    names = [_name(source, f"{key}[{index}]", item) for index, item in enumerate(value)]
    return names


def parse_set_document(
    document: object, source: str
) -> configuration_pb2.ReplicationSetConfiguration:
    """Turn a parsed YAML document into a validated ReplicationSetConfiguration."""
    if not isinstance(document, dict):
        raise _fail(source, "(top level)", "a mapping with database and tables", document)
    _check_keys(source, "", document, _TOP_KEYS)
    configuration = configuration_pb2.ReplicationSetConfiguration()

    database = document.get("database")
    if not isinstance(database, dict):
        raise _fail(source, "database", "a mapping with a dsn", database)
    _check_keys(source, "database", database, _DATABASE_KEYS)
    configuration.database.dsn = _name(source, "database.dsn", database.get("dsn"))

    allow_unkeyed = document.get("allow_unkeyed", False)
    if not isinstance(allow_unkeyed, bool):
        raise _fail(source, "allow_unkeyed", "true or false", allow_unkeyed)
    configuration.allow_unkeyed = allow_unkeyed

    tables = document.get("tables")
    if not isinstance(tables, list) or not tables:
        raise _fail(source, "tables", "a non-empty list of tables", tables)
    for index, table in enumerate(tables):
        where = f"tables[{index}]"
        if not isinstance(table, dict):
            raise _fail(source, where, "a mapping with at least a name", table)
        _check_keys(source, where, table, _TABLE_KEYS)
        configuration.tables.add(
            name=_name(source, f"{where}.name", table.get("name")),
            schema=_name(source, f"{where}.schema", table.get("schema", DEFAULT_SCHEMA)),
            key_columns=_names(source, f"{where}.key_columns", table.get("key_columns")),
            columns=_names(source, f"{where}.columns", table.get("columns")),
        )
    validate_set_configuration(configuration, source)
    return configuration


def validate_set_configuration(
    configuration: configuration_pb2.ReplicationSetConfiguration, source: str
) -> None:
    """Check what the file alone can tell: names present, no duplicates, keys captured."""
    if not configuration.database.dsn:
        raise _fail(source, "database.dsn", "a non-empty libpq connection string", "")
    if not configuration.tables:
        raise _fail(source, "tables", "a non-empty list of tables", [])
    seen: set[tuple[str, str]] = set()
    for index, table in enumerate(configuration.tables):
        where = f"tables[{index}]"
        if not table.name:
            raise _fail(source, f"{where}.name", "a non-empty table name", table.name)
        if not table.schema:
            raise _fail(source, f"{where}.schema", "a non-empty schema name", table.schema)
        if (table.schema, table.name) in seen:
            raise ConfigurationError(
                f"{source}: {where}: table {table.schema!r}.{table.name!r} is listed twice"
            )
        seen.add((table.schema, table.name))
        for key in ("key_columns", "columns"):
            names = list(getattr(table, key))
            duplicates = sorted({name for name in names if names.count(name) > 1})
            if duplicates:
                raise ConfigurationError(
                    f"{source}: {where}.{key}: column {duplicates[0]!r} is listed twice"
                )
        if table.columns:
            missing = [key for key in table.key_columns if key not in table.columns]
            if missing:
                raise ConfigurationError(
                    f"{source}: {where}.columns: must include the key column {missing[0]!r} "
                    f"of table {table.schema!r}.{table.name!r}"
                )


def to_document(
    configuration: configuration_pb2.ReplicationSetConfiguration, *, mask: bool = True
) -> dict[str, Any]:
    """The YAML shape of a configuration; the DSN's password is masked unless told not to."""
    dsn = configuration.database.dsn
    tables: list[dict[str, Any]] = []
    for table in configuration.tables:
        entry: dict[str, Any] = {"name": table.name, "schema": table.schema}
        if table.key_columns:
            entry["key_columns"] = list(table.key_columns)
        if table.columns:
            entry["columns"] = list(table.columns)
        tables.append(entry)
    return {
        "database": {"dsn": mask_dsn(dsn) if mask else dsn},
        "allow_unkeyed": configuration.allow_unkeyed,
        "tables": tables,
    }


def read_set(
    client: KazooClient, cluster: str, set_name: str
) -> configuration_pb2.ReplicationSetConfiguration:
    """A set's configuration from ZooKeeper; kazoo's ``NoNodeError`` when it does not exist."""
    data, _stat = client.get(names.set_path(cluster, set_name))
    return configuration_pb2.ReplicationSetConfiguration.FromString(data)
