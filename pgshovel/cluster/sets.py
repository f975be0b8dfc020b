"""Replication set configuration files: YAML (or protobuf text format) to protobuf.

A set file names the source database and the tables to capture; see
example/set.yml for the documented format. Everything is validated when read:
an invalid file is a ``ConfigurationError`` listing every problem, one line
each naming the file, the key and what is expected. The same checks run on
text-format files, and ``to_document`` turns a configuration back into the
YAML shape (for ``set inspect``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from google.protobuf import text_format
from kazoo.client import KazooClient
from pydantic import Field

from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.versions import set_version
from pgshovel.config_files import expand, load_yaml, read_text
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.settings import Settings, validate

DEFAULT_SCHEMA = "public"
#: packing's defaults (ext/packing.c): changes and bytes of their data per queue row
PACKING_ROWS = 1000
PACKING_BYTES = 16384
#: what the trigger accepts (a row stays far below PostgreSQL's 1 GB per value)
PACKING_MAX_ROWS = 1_000_000
PACKING_MAX_BYTES = 64 * 1024 * 1024
TEXT_FORMAT_SUFFIXES = (".txt", ".pbtxt", ".textproto", ".prototxt")

__all__ = [
    "load_set_configuration",
    "parse_set_document",
    "read_set",
    "set_version",
    "to_document",
    "validate_set_configuration",
]

ColumnNames = list[Annotated[str, Field(min_length=1)]]


class TableEntry(Settings):
    """One entry of ``tables:``."""

    name: Annotated[str, Field(min_length=1)]
    schema_: Annotated[str, Field(min_length=1, alias="schema")] = DEFAULT_SCHEMA
    key_columns: ColumnNames = []
    columns: ColumnNames = []
    #: stamp each mutation with who made it; unset: the set's ``provenance``
    provenance: bool | None = None


class DatabaseEntry(Settings):
    """``database:``: how to reach the source."""

    dsn: Annotated[str, Field(min_length=1)]


class PackingEntry(Settings):
    """``packing:``: how capture packs a transaction's changes into queue rows (README "Packed
    events"); a key left out takes its default."""

    #: changes per queue row at most; 1 writes a row per change (no packing)
    rows: Annotated[int, Field(ge=1, le=PACKING_MAX_ROWS)] = PACKING_ROWS
    #: bytes of change data per queue row at most
    bytes: Annotated[int, Field(ge=1, le=PACKING_MAX_BYTES)] = PACKING_BYTES


class SetFile(Settings):
    """A set file as written (YAML)."""

    database: DatabaseEntry
    allow_unkeyed: bool = False
    #: every table's default for ``provenance`` (README "Provenance")
    provenance: bool = False
    #: unset: the defaults, and the set's version stays what it was before packing existed
    packing: PackingEntry | None = None
    tables: Annotated[list[TableEntry], Field(min_length=1)]


def load_set_configuration(path: Path | str) -> configuration_pb2.ReplicationSetConfiguration:
    """Read and validate a set file: YAML, or protobuf text format by its suffix."""
    path = Path(path)
    if path.suffix in TEXT_FORMAT_SUFFIXES:
        return _load_text_format(path)
    return parse_set_document(load_yaml(path), str(path))


def _load_text_format(path: Path) -> configuration_pb2.ReplicationSetConfiguration:
    text = read_text(path)
    configuration = configuration_pb2.ReplicationSetConfiguration()
    try:
        text_format.Parse(text, configuration)
    except text_format.ParseError as error:
        raise ConfigurationError(f"{path}: invalid protobuf text format: {error}") from error
    configuration.database.dsn = expand(configuration.database.dsn, str(path), where="database.dsn")
    for table in configuration.tables:
        if not table.schema:
            table.schema = DEFAULT_SCHEMA
    if configuration.HasField("packing"):
        configuration.packing.rows = configuration.packing.rows or PACKING_ROWS
        configuration.packing.bytes = configuration.packing.bytes or PACKING_BYTES
    validate_set_configuration(configuration, str(path))
    return configuration


def parse_set_document(
    document: object, source: str
) -> configuration_pb2.ReplicationSetConfiguration:
    """Turn a parsed YAML document into a validated ReplicationSetConfiguration."""
    parsed = validate(SetFile, document, source)
    configuration = configuration_pb2.ReplicationSetConfiguration(
        allow_unkeyed=parsed.allow_unkeyed
    )
    configuration.database.dsn = parsed.database.dsn
    if parsed.packing is not None:
        configuration.packing.rows = parsed.packing.rows
        configuration.packing.bytes = parsed.packing.bytes
    for table in parsed.tables:
        configuration.tables.add(
            name=table.name,
            schema=table.schema_,
            key_columns=table.key_columns,
            columns=table.columns,
            provenance=parsed.provenance if table.provenance is None else table.provenance,
        )
    validate_set_configuration(configuration, source)
    return configuration


def _expected(source: str, key: str, expected: str, value: object) -> str:
    return f"{source}: {key}: expected {expected}, got {value!r}"


def _packing_problems(
    configuration: configuration_pb2.ReplicationSetConfiguration, source: str
) -> list[str]:
    if not configuration.HasField("packing"):
        return []
    found = []
    for key, most in (("rows", PACKING_MAX_ROWS), ("bytes", PACKING_MAX_BYTES)):
        value = getattr(configuration.packing, key)
        if not 1 <= value <= most:
            found.append(_expected(source, f"packing.{key}", f"an integer from 1 to {most}", value))
    return found


def set_problems(
    configuration: configuration_pb2.ReplicationSetConfiguration, source: str
) -> list[str]:
    """Every problem the file alone can tell, one line each naming the file and the key: names
    present, no duplicates, keys captured, no two tables that would share a table topic
    (``pgshovel.cluster.names.colliding_tables``)."""
    found: list[str] = []
    if not configuration.database.dsn:
        found.append(_expected(source, "database.dsn", "a non-empty libpq connection string", ""))
    if not configuration.tables:
        found.append(_expected(source, "tables", "a non-empty list of tables", []))
    found.extend(_packing_problems(configuration, source))
    seen: set[tuple[str, str]] = set()
    for index, table in enumerate(configuration.tables):
        where = f"tables[{index}]"
        if not table.name:
            found.append(_expected(source, f"{where}.name", "a non-empty table name", table.name))
        if not table.schema:
            found.append(
                _expected(source, f"{where}.schema", "a non-empty schema name", table.schema)
            )
        if table.name and table.schema and (table.schema, table.name) in seen:
            found.append(
                f"{source}: {where}: table {table.schema!r}.{table.name!r} is listed twice"
            )
        seen.add((table.schema, table.name))
        for key in ("key_columns", "columns"):
            listed = list(getattr(table, key))
            duplicates = sorted({name for name in listed if listed.count(name) > 1})
            found += [
                f"{source}: {where}.{key}: column {name!r} is listed twice" for name in duplicates
            ]
        if table.columns:
            found += [
                f"{source}: {where}.columns: must include the key column {key!r} "
                f"of table {table.schema!r}.{table.name!r}"
                for key in table.key_columns
                if key not in table.columns
            ]
    colliding = names.colliding_tables((table.schema, table.name) for table in configuration.tables)
    if colliding is not None:
        (schema_a, table_a), (schema_b, table_b), suffix = colliding
        found.append(
            f"{source}: tables: {schema_a!r}.{table_a!r} and {schema_b!r}.{table_b!r} would "
            f"publish into the same kafka table topic ('[prefix.]{suffix}'); rename one of "
            "them or leave one out of the set"
        )
    return found


def validate_set_configuration(
    configuration: configuration_pb2.ReplicationSetConfiguration, source: str
) -> None:
    """Refuse a configuration with any of ``set_problems``, listing them all (one per line)."""
    found = set_problems(configuration, source)
    if found:
        raise ConfigurationError("\n".join(found))


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
        if table.provenance:
            entry["provenance"] = True
        tables.append(entry)
    document: dict[str, Any] = {
        "database": {"dsn": mask_dsn(dsn) if mask else dsn},
        "allow_unkeyed": configuration.allow_unkeyed,
    }
    if configuration.HasField("packing"):
        document["packing"] = {
            "rows": configuration.packing.rows,
            "bytes": configuration.packing.bytes,
        }
    document["tables"] = tables
    return document


def read_set(
    client: KazooClient, cluster: str, set_name: str
) -> configuration_pb2.ReplicationSetConfiguration:
    """A set's configuration from ZooKeeper; kazoo's ``NoNodeError`` when it does not exist."""
    data, _stat = client.get(names.set_path(cluster, set_name))
    return configuration_pb2.ReplicationSetConfiguration.FromString(data)
