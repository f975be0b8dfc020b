from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClusterConfiguration(_message.Message):
    __slots__ = ["version"]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class DatabaseConfiguration(_message.Message):
    __slots__ = ["dsn"]
    DSN_FIELD_NUMBER: _ClassVar[int]
    dsn: str
    def __init__(self, dsn: _Optional[str] = ...) -> None: ...

class PackingConfiguration(_message.Message):
    __slots__ = ["bytes", "rows"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    rows: int
    def __init__(self, rows: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class ReplicationSetConfiguration(_message.Message):
    __slots__ = ["allow_unkeyed", "database", "packing", "tables"]
    ALLOW_UNKEYED_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    PACKING_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    allow_unkeyed: bool
    database: DatabaseConfiguration
    packing: PackingConfiguration
    tables: _containers.RepeatedCompositeFieldContainer[TableConfiguration]
    def __init__(self, database: _Optional[_Union[DatabaseConfiguration, _Mapping]] = ..., tables: _Optional[_Iterable[_Union[TableConfiguration, _Mapping]]] = ..., allow_unkeyed: bool = ..., packing: _Optional[_Union[PackingConfiguration, _Mapping]] = ...) -> None: ...

class TableConfiguration(_message.Message):
    __slots__ = ["columns", "key_columns", "name", "provenance", "schema"]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedScalarFieldContainer[str]
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    name: str
    provenance: bool
    schema: str
    def __init__(self, schema: _Optional[str] = ..., name: _Optional[str] = ..., key_columns: _Optional[_Iterable[str]] = ..., columns: _Optional[_Iterable[str]] = ..., provenance: bool = ...) -> None: ...
