"""The end-to-end source schema: an odd-named table, a composite key, a type matrix, a bulk table.

Every value the workload writes comes from the pools below, as PostgreSQL text
(the column type parses it), so the edge cases (NaN, infinities, BC dates,
2-D arrays, the enum, the domain) keep coming back in inserts and updates.
The enum and the domain must exist in the target database too: the worker
creates its tables with the source's column types.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from psycopg2 import sql
from psycopg2.extras import execute_values

from pgshovel.source import connect


@dataclass(frozen=True)
class Table:
    """A source table of the set: its name, key and the columns the workload writes."""

    schema: str
    name: str
    key: tuple[str, ...]

    @property
    def identifier(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.name)

    def set_entry(self) -> dict[str, str]:
        return {"schema": self.schema, "name": self.name}


ODD = Table('Sö "Odd" Schema', 'Mixed Cäse "ταβλε" 😀', ("Ключ Id",))
PAIRS = Table("public", "Pairs", ("region", "n"))
MATRIX = Table("public", "type matrix", ("id",))
BULK = Table("public", "bulk", ("id",))

REGIONS = ("north", "Süd", 'east "quoted"', "west side", "")

TYPES_DDL = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'ünïcode mood');
CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
"""

TABLES_DDL = """
CREATE SCHEMA {odd_schema};
CREATE TABLE {odd} ("Ключ Id" bigint PRIMARY KEY, "Value Column" text, "qu""ote" integer,
                    "CamelCase" boolean);
CREATE TABLE {pairs} (region text, n bigint, payload text, amount numeric(14, 2),
                      at timestamptz, PRIMARY KEY (region, n));
CREATE TABLE {matrix} (
    id bigint PRIMARY KEY,
    c_int2 int2, c_int4 int4, c_int8 int8, c_numeric numeric, c_float4 float4, c_float8 float8,
    c_text text, c_varchar varchar(12), c_char char(5), c_bytea bytea, c_bool bool,
    c_date date, c_time time, c_timetz timetz, c_ts timestamp, c_tstz timestamptz,
    c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb, c_int_array int[],
    c_text_2d text[], c_mood mood, c_inet inet, c_positive positive
);
CREATE TABLE {bulk} (id bigint PRIMARY KEY, body text, n integer);
"""

#: text values per type-matrix column (None is NULL, present in every pool)
MATRIX_VALUES: dict[str, tuple[str | None, ...]] = {
    "c_int2": ("-32768", "32767", "0", "7"),
    "c_int4": ("-2147483648", "2147483647", "42"),
    "c_int8": ("-9223372036854775808", "9223372036854775807", "1"),
    "c_numeric": (
        "NaN",
        "0",
        "-1.50",
        "123456789012345678901234567890.123456789012345678901",
        "1" + "0" * 400,
        "-0.000000000000000000000000000001",
    ),
    "c_float4": ("Infinity", "-Infinity", "NaN", "1.1", "-0", "3.4028235e+38", "1e-45"),
    "c_float8": ("Infinity", "-Infinity", "NaN", "0.1", "-1.7976931348623157e+308", "5e-324"),
    "c_text": ("", 'multi\nline "quoted" \\ é 😀', "tab\there", "NULL", "x" * 300),
    "c_varchar": ("", "  spaces  ", "ünï 😀"),
    "c_char": ("ab", "abcde", " "),
    "c_bytea": ("\\x", "\\x00ff10", "\\xdeadbeef00"),
    "c_bool": ("true", "false"),
    "c_date": ("2024-02-29", "infinity", "-infinity", "4713-01-01 BC", "0044-03-15 BC"),
    "c_time": ("00:00:00", "23:59:59.999999", "24:00:00", "12:30:00.5"),
    "c_timetz": ("12:34:56.789+05:30", "00:00:00-14", "23:59:59.999999+14"),
    "c_ts": (
        "2024-01-01 12:00:00.000001",
        "infinity",
        "-infinity",
        "0001-01-01 00:00:00 BC",
        "294276-12-31 23:59:59.999999",
    ),
    "c_tstz": (
        "2024-06-30 23:59:59.5+02",
        "-infinity",
        "infinity",
        "1999-12-31 23:59:59.999999+00",
        "0044-03-15 12:00:00+00 BC",
    ),
    "c_interval": (
        "1 year 2 mons -3 days 04:05:06.789",
        "-178000000 years",
        "0",
        "1 day -00:00:01",
    ),
    "c_uuid": ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000000"),
    "c_json": ('{"b": 1,  "a": [1, 2.50]}', "null", '"ünï"', "[]"),
    "c_jsonb": ('{"a": {"x": null}, "b": [1, "two", 3.0]}', "{}", "12.50"),
    "c_int_array": ("{1,NULL,3}", "{}", "{{1,2},{3,NULL}}", "{NULL}"),
    "c_text_2d": ('{{a,b},{"c d",NULL}}', '{{"\\"q\\"",""}}', "{{NULL}}", "{}"),
    "c_mood": ("sad", "happy", "ünïcode mood"),
    "c_inet": ("192.168.0.1/24", "::1", "2001:db8::/32", "10.0.0.1"),
    "c_positive": ("1", "2147483647", "42"),
}
MATRIX_COLUMNS = tuple(MATRIX_VALUES)


#: The one value of the pool Arrow (and so a Parquet target) cannot hold: Arrow's
#: timestamps end in 294247 AD, PostgreSQL's in 294276 AD.
BEYOND_ARROW = "294276-12-31 23:59:59.999999"


def matrix_value(rng: random.Random, column: str, arrow_safe: bool = False) -> str | None:
    """A value of the column's pool, NULL one time in eight."""
    if rng.random() < 0.125:
        return None
    pool = MATRIX_VALUES[column]
    if arrow_safe:
        pool = tuple(value for value in pool if value != BEYOND_ARROW)
    return rng.choice(pool)


def matrix_row(rng: random.Random, key: int, arrow_safe: bool = False) -> tuple[object, ...]:
    return (key, *(matrix_value(rng, column, arrow_safe) for column in MATRIX_COLUMNS))


def odd_row(rng: random.Random, key: int) -> tuple[object, ...]:
    text = rng.choice(("ünï", "plain", 'say "hi"', "back\\slash", None))
    return (key, text, rng.randrange(-1000, 1000), rng.random() < 0.5)


def pairs_row(rng: random.Random, region: str, n: int) -> tuple[object, ...]:
    return (region, n, f"p{n}", rng.randrange(-(10**9), 10**9) / 100, "2024-01-01 00:00:00+00")


def create_types(dsn: str) -> None:
    _run(dsn, [sql.SQL(TYPES_DDL)])


def create_source(dsn: str, rows: int, bulk_rows: int, seed: int, arrow_safe: bool = False) -> None:
    """Create the types and tables on the source and fill them (``rows`` per small table)."""
    rng = random.Random(seed)
    names = {
        "odd_schema": sql.Identifier(ODD.schema),
        "odd": ODD.identifier,
        "pairs": PAIRS.identifier,
        "matrix": MATRIX.identifier,
        "bulk": BULK.identifier,
    }
    _run(dsn, [sql.SQL(TYPES_DDL), sql.SQL(TABLES_DDL).format(**names)])
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        _insert(cursor, ODD, [odd_row(rng, key) for key in range(1, rows + 1)])
        _insert(
            cursor,
            PAIRS,
            [pairs_row(rng, REGIONS[n % len(REGIONS)], n) for n in range(1, rows + 1)],
        )
        _insert(cursor, MATRIX, [matrix_row(rng, key, arrow_safe) for key in range(1, rows + 1)])
        cursor.execute(
            sql.SQL(
                "INSERT INTO {} SELECT i, repeat('b', 80) || i, i %% 1000 "
                "FROM generate_series(1, %s) AS i"
            ).format(BULK.identifier),
            (bulk_rows,),
        )
        for table in (ODD, PAIRS, MATRIX, BULK):
            cursor.execute(sql.SQL("ANALYZE {}").format(table.identifier))
    connection.close()


def _insert(cursor: object, table: Table, rows: Sequence[tuple[object, ...]]) -> None:
    statement = sql.SQL("INSERT INTO {} VALUES %s").format(table.identifier)
    execute_values(cursor, statement.as_string(cursor), rows, page_size=500)  # type: ignore[arg-type]


def _run(dsn: str, statements: Sequence[sql.Composable]) -> None:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    connection.close()


def dump(dsn: str, table: Table) -> list[str]:
    """Every row of ``table`` as PostgreSQL's row text, in key order."""
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(
            sql.SQL("SELECT t::text FROM {} AS t ORDER BY {}").format(
                table.identifier,
                sql.SQL(", ").join(sql.Identifier("t", column) for column in table.key),
            )
        )
        rows = [row[0] for row in cursor.fetchall()]
    connection.close()
    return rows


def assert_same_rows(source: str, target: str, table: Table) -> int:
    """Source and target hold the same rows of ``table``; return how many."""
    expected, actual = dump(source, table), dump(target, table)
    if expected != actual:
        missing = sorted(set(expected) - set(actual))
        extra = sorted(set(actual) - set(expected))
        raise AssertionError(
            f"{table.schema}.{table.name}: source has {len(expected)} rows, target "
            f"{len(actual)}; missing in target (first 5): {missing[:5]!r}; "
            f"only in target (first 5): {extra[:5]!r}"
        )
    return len(expected)
