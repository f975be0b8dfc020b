from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FINITE: Infinity
NEGATIVE: Infinity
POSITIVE: Infinity

class Array(_message.Message):
    __slots__ = ["dimensions", "element_type", "elements", "lower_bounds"]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    LOWER_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    dimensions: _containers.RepeatedScalarFieldContainer[int]
    element_type: str
    elements: _containers.RepeatedCompositeFieldContainer[Value]
    lower_bounds: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, elements: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., dimensions: _Optional[_Iterable[int]] = ..., lower_bounds: _Optional[_Iterable[int]] = ..., element_type: _Optional[str] = ...) -> None: ...

class BatchIdentifier(_message.Message):
    __slots__ = ["id", "node"]
    ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    id: int
    node: bytes
    def __init__(self, id: _Optional[int] = ..., node: _Optional[bytes] = ...) -> None: ...

class BatchOperation(_message.Message):
    __slots__ = ["batch", "begin", "commit", "mutation", "rollback", "rows", "schema_change", "watermark"]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_CHANGE_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    batch: BatchIdentifier
    begin: Begin
    commit: Commit
    mutation: Mutation
    rollback: Rollback
    rows: MutationBatch
    schema_change: SchemaChange
    watermark: Watermark
    def __init__(self, batch: _Optional[_Union[BatchIdentifier, _Mapping]] = ..., begin: _Optional[_Union[Begin, _Mapping]] = ..., mutation: _Optional[_Union[Mutation, _Mapping]] = ..., commit: _Optional[_Union[Commit, _Mapping]] = ..., rollback: _Optional[_Union[Rollback, _Mapping]] = ..., schema_change: _Optional[_Union[SchemaChange, _Mapping]] = ..., watermark: _Optional[_Union[Watermark, _Mapping]] = ..., rows: _Optional[_Union[MutationBatch, _Mapping]] = ...) -> None: ...

class BatchOperationHead(_message.Message):
    __slots__ = ["batch", "begin", "commit", "mutation", "rollback", "rows", "schema_change", "watermark"]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    MUTATION_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_CHANGE_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    batch: BatchIdentifier
    begin: Begin
    commit: Commit
    mutation: Skipped
    rollback: Rollback
    rows: RowsHead
    schema_change: SchemaChange
    watermark: Watermark
    def __init__(self, batch: _Optional[_Union[BatchIdentifier, _Mapping]] = ..., begin: _Optional[_Union[Begin, _Mapping]] = ..., mutation: _Optional[_Union[Skipped, _Mapping]] = ..., commit: _Optional[_Union[Commit, _Mapping]] = ..., rollback: _Optional[_Union[Rollback, _Mapping]] = ..., schema_change: _Optional[_Union[SchemaChange, _Mapping]] = ..., watermark: _Optional[_Union[Watermark, _Mapping]] = ..., rows: _Optional[_Union[RowsHead, _Mapping]] = ...) -> None: ...

class Begin(_message.Message):
    __slots__ = ["encoding", "end", "partition", "partitions", "set_version", "start"]
    class Encoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS: Begin.Encoding
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ROWS: Begin.Encoding
    SET_VERSION_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    encoding: Begin.Encoding
    end: Tick
    partition: int
    partitions: int
    set_version: str
    start: Tick
    def __init__(self, start: _Optional[_Union[Tick, _Mapping]] = ..., end: _Optional[_Union[Tick, _Mapping]] = ..., set_version: _Optional[str] = ..., encoding: _Optional[_Union[Begin.Encoding, str]] = ..., partition: _Optional[int] = ..., partitions: _Optional[int] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ["name", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: Value
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class ColumnShape(_message.Message):
    __slots__ = ["name", "not_null", "number", "sql_type", "type_name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOT_NULL_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    SQL_TYPE_FIELD_NUMBER: _ClassVar[int]
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    not_null: bool
    number: int
    sql_type: str
    type_name: str
    def __init__(self, name: _Optional[str] = ..., number: _Optional[int] = ..., sql_type: _Optional[str] = ..., type_name: _Optional[str] = ..., not_null: bool = ...) -> None: ...

class Commit(_message.Message):
    __slots__ = ["batch_mutations", "mutations"]
    BATCH_MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    batch_mutations: int
    mutations: int
    def __init__(self, mutations: _Optional[int] = ..., batch_mutations: _Optional[int] = ...) -> None: ...

class Date(_message.Message):
    __slots__ = ["days", "infinity"]
    DAYS_FIELD_NUMBER: _ClassVar[int]
    INFINITY_FIELD_NUMBER: _ClassVar[int]
    days: int
    infinity: Infinity
    def __init__(self, days: _Optional[int] = ..., infinity: _Optional[_Union[Infinity, str]] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ["epoch", "publisher", "sequence", "timestamp"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    publisher: bytes
    sequence: int
    timestamp: int
    def __init__(self, publisher: _Optional[bytes] = ..., sequence: _Optional[int] = ..., timestamp: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class Interval(_message.Message):
    __slots__ = ["days", "micros", "months"]
    DAYS_FIELD_NUMBER: _ClassVar[int]
    MICROS_FIELD_NUMBER: _ClassVar[int]
    MONTHS_FIELD_NUMBER: _ClassVar[int]
    days: int
    micros: int
    months: int
    def __init__(self, months: _Optional[int] = ..., days: _Optional[int] = ..., micros: _Optional[int] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["header", "operation"]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    header: Header
    operation: BatchOperation
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., operation: _Optional[_Union[BatchOperation, _Mapping]] = ...) -> None: ...

class MessageHead(_message.Message):
    __slots__ = ["header", "operation"]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    header: Header
    operation: BatchOperationHead
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., operation: _Optional[_Union[BatchOperationHead, _Mapping]] = ...) -> None: ...

class Mutation(_message.Message):
    __slots__ = ["id", "key_columns", "new", "old", "operation", "provenance", "provenance_of", "schema", "set_version", "table", "timestamp", "transaction"]
    class Operation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    DELETE: Mutation.Operation
    ID_FIELD_NUMBER: _ClassVar[int]
    INSERT: Mutation.Operation
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    NEW_FIELD_NUMBER: _ClassVar[int]
    OLD_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    OPERATION_UNSPECIFIED: Mutation.Operation
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_OF_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SET_VERSION_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE: Mutation.Operation
    UPDATE: Mutation.Operation
    id: int
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    new: Row
    old: Row
    operation: Mutation.Operation
    provenance: Provenance
    provenance_of: int
    schema: str
    set_version: str
    table: str
    timestamp: int
    transaction: int
    def __init__(self, id: _Optional[int] = ..., schema: _Optional[str] = ..., table: _Optional[str] = ..., operation: _Optional[_Union[Mutation.Operation, str]] = ..., key_columns: _Optional[_Iterable[str]] = ..., old: _Optional[_Union[Row, _Mapping]] = ..., new: _Optional[_Union[Row, _Mapping]] = ..., timestamp: _Optional[int] = ..., transaction: _Optional[int] = ..., set_version: _Optional[str] = ..., provenance: _Optional[_Union[Provenance, _Mapping]] = ..., provenance_of: _Optional[int] = ...) -> None: ...

class MutationBatch(_message.Message):
    __slots__ = ["changes", "count", "provenances", "tables"]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    PROVENANCES_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[RowChange]
    count: int
    provenances: _containers.RepeatedCompositeFieldContainer[Provenance]
    tables: _containers.RepeatedCompositeFieldContainer[RowTable]
    def __init__(self, tables: _Optional[_Iterable[_Union[RowTable, _Mapping]]] = ..., changes: _Optional[_Iterable[_Union[RowChange, _Mapping]]] = ..., provenances: _Optional[_Iterable[_Union[Provenance, _Mapping]]] = ..., count: _Optional[int] = ...) -> None: ...

class Other(_message.Message):
    __slots__ = ["text", "type"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    text: str
    type: str
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Provenance(_message.Message):
    __slots__ = ["annotation", "application_name", "client_addr", "current_user", "query_id", "session_user"]
    ANNOTATION_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    CURRENT_USER_FIELD_NUMBER: _ClassVar[int]
    QUERY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_USER_FIELD_NUMBER: _ClassVar[int]
    annotation: str
    application_name: str
    client_addr: str
    current_user: str
    query_id: int
    session_user: str
    def __init__(self, current_user: _Optional[str] = ..., session_user: _Optional[str] = ..., application_name: _Optional[str] = ..., client_addr: _Optional[str] = ..., query_id: _Optional[int] = ..., annotation: _Optional[str] = ...) -> None: ...

class Rollback(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Row(_message.Message):
    __slots__ = ["columns"]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    def __init__(self, columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ...) -> None: ...

class RowChange(_message.Message):
    __slots__ = ["id", "new", "old", "operation", "provenance", "table", "timestamp", "transaction"]
    ID_FIELD_NUMBER: _ClassVar[int]
    NEW_FIELD_NUMBER: _ClassVar[int]
    OLD_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    id: int
    new: bytes
    old: bytes
    operation: Mutation.Operation
    provenance: int
    table: int
    timestamp: int
    transaction: int
    def __init__(self, id: _Optional[int] = ..., table: _Optional[int] = ..., operation: _Optional[_Union[Mutation.Operation, str]] = ..., transaction: _Optional[int] = ..., timestamp: _Optional[int] = ..., old: _Optional[bytes] = ..., new: _Optional[bytes] = ..., provenance: _Optional[int] = ...) -> None: ...

class RowTable(_message.Message):
    __slots__ = ["set_version", "shape"]
    SET_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    set_version: str
    shape: TableShape
    def __init__(self, shape: _Optional[_Union[TableShape, _Mapping]] = ..., set_version: _Optional[str] = ...) -> None: ...

class RowsHead(_message.Message):
    __slots__ = ["count"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class SchemaChange(_message.Message):
    __slots__ = ["added_defaults", "command", "id", "kind", "problem", "relation", "rewrites_rows", "schema", "set_version", "shape", "table", "timestamp", "transaction"]
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ADDED_DEFAULTS_FIELD_NUMBER: _ClassVar[int]
    ALTER: SchemaChange.Kind
    ANNOUNCE: SchemaChange.Kind
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    DROP: SchemaChange.Kind
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_UNSPECIFIED: SchemaChange.Kind
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    REMOVE: SchemaChange.Kind
    REWRITES_ROWS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SET_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    added_defaults: _containers.RepeatedCompositeFieldContainer[Column]
    command: str
    id: int
    kind: SchemaChange.Kind
    problem: str
    relation: int
    rewrites_rows: bool
    schema: str
    set_version: str
    shape: TableShape
    table: str
    timestamp: int
    transaction: int
    def __init__(self, id: _Optional[int] = ..., kind: _Optional[_Union[SchemaChange.Kind, str]] = ..., schema: _Optional[str] = ..., table: _Optional[str] = ..., shape: _Optional[_Union[TableShape, _Mapping]] = ..., command: _Optional[str] = ..., added_defaults: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., rewrites_rows: bool = ..., problem: _Optional[str] = ..., timestamp: _Optional[int] = ..., transaction: _Optional[int] = ..., set_version: _Optional[str] = ..., relation: _Optional[int] = ...) -> None: ...

class Skipped(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ["xip", "xmax", "xmin"]
    XIP_FIELD_NUMBER: _ClassVar[int]
    XMAX_FIELD_NUMBER: _ClassVar[int]
    XMIN_FIELD_NUMBER: _ClassVar[int]
    xip: _containers.RepeatedScalarFieldContainer[int]
    xmax: int
    xmin: int
    def __init__(self, xmin: _Optional[int] = ..., xmax: _Optional[int] = ..., xip: _Optional[_Iterable[int]] = ...) -> None: ...

class TableShape(_message.Message):
    __slots__ = ["columns", "key", "name", "relation", "schema"]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[ColumnShape]
    key: _containers.RepeatedScalarFieldContainer[str]
    name: str
    relation: int
    schema: str
    def __init__(self, schema: _Optional[str] = ..., name: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[ColumnShape, _Mapping]]] = ..., key: _Optional[_Iterable[str]] = ..., relation: _Optional[int] = ...) -> None: ...

class Tick(_message.Message):
    __slots__ = ["id", "snapshot", "timestamp"]
    ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    id: int
    snapshot: Snapshot
    timestamp: int
    def __init__(self, id: _Optional[int] = ..., snapshot: _Optional[_Union[Snapshot, _Mapping]] = ..., timestamp: _Optional[int] = ...) -> None: ...

class Time(_message.Message):
    __slots__ = ["micros", "utc_offset", "with_zone"]
    MICROS_FIELD_NUMBER: _ClassVar[int]
    UTC_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WITH_ZONE_FIELD_NUMBER: _ClassVar[int]
    micros: int
    utc_offset: int
    with_zone: bool
    def __init__(self, micros: _Optional[int] = ..., with_zone: bool = ..., utc_offset: _Optional[int] = ...) -> None: ...

class Timestamp(_message.Message):
    __slots__ = ["infinity", "micros", "with_zone"]
    INFINITY_FIELD_NUMBER: _ClassVar[int]
    MICROS_FIELD_NUMBER: _ClassVar[int]
    WITH_ZONE_FIELD_NUMBER: _ClassVar[int]
    infinity: Infinity
    micros: int
    with_zone: bool
    def __init__(self, micros: _Optional[int] = ..., with_zone: bool = ..., infinity: _Optional[_Union[Infinity, str]] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ["array", "bool", "bytes", "date", "decimal", "double", "int64", "interval", "json", "null", "other", "string", "time", "timestamp", "uuid"]
    class Null(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    BOOL_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DATE_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_FIELD_NUMBER: _ClassVar[int]
    INT64_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    NULL: Value.Null
    NULL_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    STRING_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    array: Array
    bool: bool
    bytes: bytes
    date: Date
    decimal: str
    double: float
    int64: int
    interval: Interval
    json: str
    null: Value.Null
    other: Other
    string: str
    time: Time
    timestamp: Timestamp
    uuid: bytes
    def __init__(self, null: _Optional[_Union[Value.Null, str]] = ..., bool: bool = ..., int64: _Optional[int] = ..., double: _Optional[float] = ..., string: _Optional[str] = ..., bytes: _Optional[bytes] = ..., decimal: _Optional[str] = ..., timestamp: _Optional[_Union[Timestamp, _Mapping]] = ..., date: _Optional[_Union[Date, _Mapping]] = ..., time: _Optional[_Union[Time, _Mapping]] = ..., interval: _Optional[_Union[Interval, _Mapping]] = ..., uuid: _Optional[bytes] = ..., json: _Optional[str] = ..., array: _Optional[_Union[Array, _Mapping]] = ..., other: _Optional[_Union[Other, _Mapping]] = ...) -> None: ...

class Watermark(_message.Message):
    __slots__ = ["id", "request", "timestamp", "transaction"]
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    id: int
    request: str
    timestamp: int
    transaction: int
    def __init__(self, id: _Optional[int] = ..., request: _Optional[str] = ..., transaction: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class Infinity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
