"""Set configuration files: YAML and text format, defaults, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgshovel.cluster.sets import (
    PACKING_BYTES,
    PACKING_MAX_BYTES,
    PACKING_ROWS,
    load_set_configuration,
    parse_set_document,
    set_version,
    to_document,
)
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2

EXAMPLE = Path(__file__).resolve().parents[3] / "example" / "set.yml"


def _write(tmp_path: Path, text: str, name: str = "set.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_defaults_and_environment_expansion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_PASSWORD", "s3cret")
    path = _write(
        tmp_path,
        'database:\n  dsn: "dbname=app password=${APP_PASSWORD} host=${HOST:-db}"\n'
        "tables:\n  - name: orders\n  - {name: Lines, schema: Sales, columns: [id, qty],"
        " key_columns: [id]}\n",
    )
    configuration = load_set_configuration(path)
    assert configuration.database.dsn == "dbname=app password=s3cret host=db"
    assert not configuration.allow_unkeyed
    assert [(t.schema, t.name) for t in configuration.tables] == [
        ("public", "orders"),
        ("Sales", "Lines"),
    ]
    assert list(configuration.tables[1].columns) == ["id", "qty"]


def test_the_documented_example_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGSHOVEL_SOURCE_DSN", raising=False)
    configuration = load_set_configuration(EXAMPLE)
    assert "dbname=app" in configuration.database.dsn
    assert [t.name for t in configuration.tables] == [
        "products",
        "customers",
        "orders",
        "order_lines",
        "Shipping Notes",
    ]
    monkeypatch.setenv("PGSHOVEL_SOURCE_DSN", "dbname=shop host=db")
    assert load_set_configuration(EXAMPLE).database.dsn == "dbname=shop host=db"


def test_text_format_is_accepted(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        'database { dsn: "dbname=app" }\ntables { name: "orders" }\nallow_unkeyed: true\n',
        name="set.pbtxt",
    )
    configuration = load_set_configuration(path)
    assert configuration.tables[0].schema == "public"
    assert configuration.allow_unkeyed


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], r"expected a mapping at the top level"),
        ({"tables": [{"name": "t"}]}, "missing 'database'"),
        ({"database": {"dsn": "x"}, "tables": []}, "tables: must not be empty"),
        ({"database": {"dsn": "x"}, "tables": [{"schema": "s"}]}, r"tables\[0\]: missing 'name'"),
        ({"database": {"dsn": "x"}, "tables": [{"name": "t", "colums": []}]}, "colums: unknown"),
        (
            {"database": {"dsn": "x"}, "tables": [{"name": "t", "key_columns": "id"}]},
            r"tables\[0\]\.key_columns: expected a list, got 'id'",
        ),
        (
            {"database": {"dsn": "x"}, "allow_unkeyed": "maybe", "tables": [{"name": "t"}]},
            "true or",
        ),
        (
            {"database": {"dsn": "x"}, "tables": [{"name": "t"}, {"name": "t"}]},
            "listed twice",
        ),
        (
            {
                "database": {"dsn": "x"},
                "tables": [{"name": "t", "key_columns": ["id"], "columns": ["v"]}],
            },
            "must include the key column 'id'",
        ),
    ],
)
def test_invalid_documents_name_the_file_and_key(document: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        parse_set_document(document, "sets/app.yml")
    assert str(caught.value).startswith("sets/app.yml: ")


def test_two_tables_that_would_share_a_table_topic_are_refused() -> None:
    """``a.b`` (schema a) and ``public."a.b"`` publish into ``<prefix>.a.b`` whatever the
    relay's prefix: refused when the set is created or updated, naming both."""
    tables: list[dict[str, str]] = [{"name": "b", "schema": "a"}, {"name": "orders"}]
    document = {"database": {"dsn": "dbname=app"}, "tables": [*tables, {"name": "a.b"}]}
    with pytest.raises(ConfigurationError) as caught:
        parse_set_document(document, "sets/app.yml")
    assert str(caught.value) == (
        "sets/app.yml: tables: 'a'.'b' and 'public'.'a.b' would publish into the same kafka "
        "table topic ('[prefix.]a.b'); rename one of them or leave one out of the set"
    )
    document["tables"] = tables
    assert len(parse_set_document(document, "sets/app.yml").tables) == 2


def test_invalid_text_format_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "database { dsn: 3 ", name="bad.textproto")
    with pytest.raises(ConfigurationError, match=r"bad\.textproto: invalid protobuf text format"):
        load_set_configuration(path)


def test_to_document_masks_the_password() -> None:
    configuration = parse_set_document(
        {"database": {"dsn": "host=h password=hunter2"}, "tables": [{"name": "t"}]}, "x"
    )
    document = to_document(configuration)
    assert "hunter2" not in str(document)
    assert document["tables"] == [{"name": "t", "schema": "public"}]
    assert to_document(configuration, mask=False)["database"]["dsn"] == "host=h password=hunter2"


def test_provenance_is_the_sets_default_unless_a_table_says_otherwise(tmp_path: Path) -> None:
    text = (
        'database:\n  dsn: "dbname=app"\n{}tables:\n  - name: a\n'
        "  - {{name: b, provenance: false}}\n  - {{name: c, provenance: true}}\n"
    )
    off = load_set_configuration(_write(tmp_path, text.format(""), "off.yml"))
    on = load_set_configuration(_write(tmp_path, text.format("provenance: true\n"), "on.yml"))
    assert [t.provenance for t in off.tables] == [False, False, True]
    assert [t.provenance for t in on.tables] == [True, False, True]
    assert [t.get("provenance", False) for t in to_document(on)["tables"]] == [True, False, True]
    # The document of a configuration reads back as the same configuration.
    assert parse_set_document(to_document(on, mask=False), "again") == on
    with pytest.raises(ConfigurationError, match="provenance"):
        parse_set_document(
            {"database": {"dsn": "x"}, "provenance": "sometimes", "tables": [{"name": "a"}]}, "f"
        )


def test_turning_provenance_on_changes_the_set_version() -> None:
    document = {"database": {"dsn": "dbname=app"}, "tables": [{"name": "a"}]}
    off = parse_set_document(document, "off")
    on = parse_set_document({**document, "provenance": True}, "on")
    # A set without provenance keeps the version it had before provenance existed.
    before = configuration_pb2.ReplicationSetConfiguration()
    before.database.dsn = "dbname=app"
    before.tables.add(name="a", schema="public")
    assert set_version(off) == set_version(before)
    assert set_version(off) != set_version(on)


def test_packing_defaults_to_the_triggers_defaults_and_reads_back(tmp_path: Path) -> None:
    document: dict[str, object] = {"database": {"dsn": "dbname=app"}, "tables": [{"name": "a"}]}
    unset = parse_set_document(document, "unset")
    assert not unset.HasField("packing") and "packing" not in to_document(unset)
    partial = parse_set_document({**document, "packing": {"rows": 50}}, "partial")
    assert (partial.packing.rows, partial.packing.bytes) == (50, PACKING_BYTES)
    assert to_document(partial)["packing"] == {"rows": 50, "bytes": PACKING_BYTES}
    assert parse_set_document(to_document(partial, mask=False), "again") == partial
    # A set that leaves packing out keeps the version it had before packing existed.
    before = configuration_pb2.ReplicationSetConfiguration()
    before.database.dsn = "dbname=app"
    before.tables.add(name="a", schema="public")
    assert set_version(unset) == set_version(before) != set_version(partial)
    text = 'database { dsn: "dbname=app" }\ntables { name: "a" }\npacking { bytes: 100 }\n'
    pbtxt = load_set_configuration(_write(tmp_path, text, "set.pbtxt"))
    assert (pbtxt.packing.rows, pbtxt.packing.bytes) == (PACKING_ROWS, 100)


@pytest.mark.parametrize(
    ("packing", "message"),
    [
        ({"rows": 0}, r"packing\.rows: must be >= 1, got 0"),
        ({"bytes": PACKING_MAX_BYTES + 1}, r"packing\.bytes: must be <= 67108864"),
        ({"rows": "many"}, r"packing\.rows: expected an integer"),
        ({"chunk": 5}, r"packing\.chunk: unknown"),
    ],
)
def test_invalid_packing_names_the_key(packing: object, message: str) -> None:
    document = {"database": {"dsn": "x"}, "packing": packing, "tables": [{"name": "t"}]}
    with pytest.raises(ConfigurationError, match=message):
        parse_set_document(document, "sets/app.yml")


def test_invalid_packing_in_text_format_names_the_key(tmp_path: Path) -> None:
    text = 'database { dsn: "x" }\ntables { name: "a" }\npacking { rows: 2000000 }\n'
    with pytest.raises(ConfigurationError, match=r"packing\.rows: expected an integer from 1"):
        load_set_configuration(_write(tmp_path, text, "set.pbtxt"))
