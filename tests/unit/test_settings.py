"""Every configuration mistake is one line naming the file and the key; nothing is called first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pgshovel.cluster.sets import load_set_configuration
from pgshovel.errors import ConfigurationError
from pgshovel.relay import config as relay_config
from pgshovel.replication.config import load_configuration

RELAY = """\
writer:
  path: pgshovel.relay.kafka:KafkaWriter
  configuration: {bootstrap_servers: "127.0.0.1:9092"}
"""


def _write(tmp_path: Path, text: str | bytes, name: str = "relay.yml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigurationError) as raised:
        relay_config.load_configuration(path)
    message = str(raised.value)
    assert "\n" not in message, "one line"
    assert message.startswith(f"{path}: "), "names the file"
    return message


def test_numbers_and_booleans_come_from_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_PORT", "9188")
    monkeypatch.setenv("TEST_FETCH", "250")
    path = _write(
        tmp_path,
        RELAY + "metrics_port: ${TEST_PORT}\nfetch_size: ${TEST_FETCH}\ntick_interval: "
        "${TEST_UNSET:-0.5}\n",
    )
    parsed = relay_config.load_configuration(path)
    assert (parsed.metrics_port, parsed.fetch_size, parsed.tick_interval) == (9188, 250, 0.5)


def test_an_unknown_key_is_named(tmp_path: Path) -> None:
    assert "tick_intervall: unknown key" in _error(_write(tmp_path, RELAY + "tick_intervall: 1\n"))


def test_a_wrong_type_is_named_with_the_value(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, RELAY + "fetch_size: many\n"))
    assert "fetch_size: expected an integer, got 'many'" in message


def test_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, RELAY + "on_error: log\non_error: exit\n"))
    assert "duplicate key 'on_error'" in message


def test_a_non_utf8_file_is_refused(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, RELAY.encode() + b"metrics_host: caf\xe9\n"))
    assert "not UTF-8 text (byte 0xe9 at offset" in message


def test_an_unset_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_NOT_SET", raising=False)
    message = _error(_write(tmp_path, RELAY + "metrics_host: ${TEST_NOT_SET}\n"))
    assert "'TEST_NOT_SET' is not set" in message


def test_a_component_of_the_wrong_type_is_refused_before_it_is_called(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = _write(
        tmp_path,
        f"writer:\n  path: subprocess:Popen\n  configuration: {{args: ['touch', '{marker}']}}\n",
    )
    message = _error(path)
    assert "writer.path: 'subprocess:Popen' is not a StreamWriter" in message
    assert not marker.exists(), "nothing from the file may run before it is validated"


def test_a_component_configuration_is_validated_against_its_constructor(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "writer:\n  path: pgshovel.relay.kafka:KafkaWriter\n"
        "  configuration: {bootstrap_servers: x, flush_timeout: soon}\n",
    )
    assert "writer.configuration.flush_timeout: expected a number, got 'soon'" in _error(path)


def test_replication_components_are_checked_too(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "loader: {path: pgshovel.relay.kafka:KafkaWriter, configuration: {bootstrap_servers: x}}\n"
        "stream: {path: pgshovel.replication.streams:KafkaStream,"
        " configuration: {bootstrap_servers: x}}\n"
        "target: {path: pgshovel.replication.targets.parquet:ParquetTarget,"
        " configuration: {path: ''}}\n",
        "replication.yml",
    )
    with pytest.raises(ConfigurationError) as raised:
        load_configuration(path)
    assert "loader.path: 'pgshovel.relay.kafka:KafkaWriter' is not a Loader" in str(raised.value)


def _alias_bomb(levels: int = 8) -> str:
    """About 450 bytes that expand to 10**levels strings through nested aliases."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_built(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, RELAY + _alias_bomb()))
    assert "expands to 1,234,567,917 values" in message and "anchors and aliases" in message


def test_a_document_that_contains_itself_is_refused(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, RELAY + "metrics_host: &loop [x, *loop]\n"))
    assert "refers to a node that contains it (line 4)" in message


def test_a_set_file_alias_bomb_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "database: {dsn: 'dbname=x'}\n" + _alias_bomb(), "set.yml")
    with pytest.raises(ConfigurationError) as raised:
        load_set_configuration(path)
    assert str(raised.value).startswith(f"{path}: the document expands to ")


def test_reused_anchors_within_the_limit_still_load(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "writer:\n  path: pgshovel.relay.kafka:KafkaWriter\n"
        "  configuration: &kafka {bootstrap_servers: '127.0.0.1:9092'}\n"
        "table_topics_kafka: *kafka\n",
    )
    assert "table_topics_kafka: unknown key" in _error(path)  # the alias was expanded


def test_the_relay_refuses_an_alias_bomb_in_one_line(tmp_path: Path) -> None:
    """pgshovel-relay reads its relay.yml before it connects anywhere: no service needed."""
    path = _write(tmp_path, RELAY + _alias_bomb())
    result = subprocess.run(
        [str(Path(sys.executable).with_name("pgshovel-relay")), str(path), "orders"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"error: {path}: the document expands to ")
    assert result.stderr.count("\n") == 1, result.stderr


def _problems(path: Path) -> list[str]:
    """Every line of the error a relay.yml gets; each names the file."""
    with pytest.raises(ConfigurationError) as raised:
        relay_config.load_configuration(path)
    lines = str(raised.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    return lines


def test_every_problem_is_listed_on_a_line_of_its_own(tmp_path: Path) -> None:
    path = _write(tmp_path, RELAY + "fetch_size: many\non_error: ignore\n")
    assert _problems(path) == [
        f"{path}: fetch_size: expected an integer, got 'many'",
        f"{path}: on_error: expected one of ['exit', 'log'], got 'ignore'",
    ]


def test_an_unknown_key_suggests_the_key_it_stands_for(tmp_path: Path) -> None:
    path = _write(tmp_path, RELAY + "tick_intervall: 1\nfetch_size: 0\n")
    assert _problems(path) == [
        f"{path}: tick_intervall: unknown key; did you mean 'tick_interval'?",
        f"{path}: fetch_size: must be >= 1, got 0",
    ]


def test_an_unknown_key_like_no_other_lists_those_there_are(tmp_path: Path) -> None:
    path = _write(tmp_path, "writer: {path: 'pgshovel.relay.kafka:KafkaWriter'}\nzzz: 1\n")
    (line,) = [line for line in _problems(path) if "zzz" in line]
    assert line.startswith(f"{path}: zzz: unknown key; expected one of [")
    assert "'tick_interval'" in line and "'writer'" in line


def test_a_missing_section_and_its_misspelling_are_both_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "writr: {path: 'pgshovel.relay.kafka:KafkaWriter'}\n")
    assert _problems(path) == [
        f"{path}: writr: unknown key; did you mean 'writer'?",
        f"{path}: missing 'writer'",
    ]


def test_nested_typos_in_a_component_configuration_are_each_named(tmp_path: Path) -> None:
    """``writer.configuration`` is checked against KafkaWriter's constructor, and its
    ``table_topics`` against their own model: every problem, each with its suggestion."""
    path = _write(
        tmp_path,
        "writer:\n  path: pgshovel.relay.kafka:KafkaWriter\n  configuration:\n"
        "    bootstrap_servers: x\n    flush_timout: 5\n"
        "    table_topics: {formt: json, snapshot_chunk_rows: none}\n"
        "tick_interval: soon\n",
    )
    assert _problems(path) == [
        f"{path}: writer.configuration.flush_timout: unknown key for KafkaWriter; "
        "did you mean 'flush_timeout'?",
        f"{path}: writer.configuration.table_topics.formt: unknown key; did you mean 'format'?",
        f"{path}: writer.configuration.table_topics.snapshot_chunk_rows: expected an integer, "
        "got 'none'",
        f"{path}: tick_interval: expected a number, got 'soon'",
    ]


def test_replication_yml_lists_its_problems_with_suggestions(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "spark: {mastr: 'local[2]'}\n"
        "loader: {path: pgshovel.replication.loaders:PostgresSnapshotLoader,"
        " configuration: {ranges_per_tabel: 3}}\n"
        "stream: {path: pgshovel.replication.streams:KafkaStream,"
        " configuration: {bootstrap_servers: x}}\n"
        "target: {path: pgshovel.replication.targets.parquet:ParquetTarget,"
        " configuration: {path: /tmp/x}}\n"
        "snapshot: {parallel: 2}\n"
        "metrics_port: port\n",
        "replication.yml",
    )
    with pytest.raises(ConfigurationError) as raised:
        load_configuration(path)
    assert str(raised.value).splitlines() == [
        f"{path}: spark.mastr: unknown key; did you mean 'master'?",
        f"{path}: loader.configuration.ranges_per_tabel: unknown key for "
        "PostgresSnapshotLoader; did you mean 'ranges_per_table'?",
        f"{path}: snapshot: unknown key; did you mean 'snapshots'?",
        f"{path}: metrics_port: expected a port number, got 'port'",
    ]


def test_a_set_file_lists_its_problems_with_suggestions(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "database: {dsn: 'dbname=x'}\nallow_unkeyd: true\n"
        "tables:\n  - {name: orders, colums: [id]}\n  - {name: lines, key_columns: yes}\n",
        "set.yml",
    )
    with pytest.raises(ConfigurationError) as raised:
        load_set_configuration(path)
    assert str(raised.value).splitlines() == [
        f"{path}: allow_unkeyd: unknown key; did you mean 'allow_unkeyed'?",
        f"{path}: tables[0].colums: unknown key; did you mean 'columns'?",
        f"{path}: tables[1].key_columns: expected a list, got True",
    ]


def test_a_set_file_lists_every_inconsistency(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "database: {dsn: 'dbname=x'}\ntables:\n"
        "  - {name: orders, key_columns: [id], columns: [status, status]}\n"
        "  - {name: orders}\n",
        "set.yml",
    )
    with pytest.raises(ConfigurationError) as raised:
        load_set_configuration(path)
    assert str(raised.value).splitlines() == [
        f"{path}: tables[0].columns: column 'status' is listed twice",
        f"{path}: tables[0].columns: must include the key column 'id' of table 'public'.'orders'",
        f"{path}: tables[1]: table 'public'.'orders' is listed twice",
    ]


def test_every_repeated_key_is_listed_with_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, RELAY + "on_error: log\non_error: exit\nfetch_size: 1\nfetch_size: 2\n")
    assert _problems(path) == [
        f"{path}: line 5: duplicate key 'on_error' (each key may appear once in a mapping)",
        f"{path}: line 7: duplicate key 'fetch_size' (each key may appear once in a mapping)",
    ]


def test_every_unset_variable_is_listed_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEST_NOT_SET", raising=False)
    monkeypatch.delenv("TEST_NOT_SET_EITHER", raising=False)
    path = _write(
        tmp_path,
        RELAY + "metrics_host: ${TEST_NOT_SET}\nstandbys: [a, '${TEST_NOT_SET_EITHER}']\n",
    )
    assert _problems(path) == [
        f"{path}: metrics_host: environment variable 'TEST_NOT_SET' is not set and has no "
        "default (write ${TEST_NOT_SET:-default} to give one)",
        f"{path}: standbys[1]: environment variable 'TEST_NOT_SET_EITHER' is not set and has "
        "no default (write ${TEST_NOT_SET_EITHER:-default} to give one)",
    ]


def test_the_relay_prints_every_problem_as_one_block_and_exits_1(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "writer:\n  path: pgshovel.relay.kafka:KafkaWriter\n"
        "  configuration: {bootstrap_servers: x, flush_timout: 5}\ntick_intervall: 1\n",
    )
    result = subprocess.run(
        [str(Path(sys.executable).with_name("pgshovel-relay")), str(path), "orders"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"error: {path}: writer.configuration.flush_timout: unknown key for KafkaWriter; "
        "did you mean 'flush_timeout'?",
        f"error: {path}: tick_intervall: unknown key; did you mean 'tick_interval'?",
    ]
