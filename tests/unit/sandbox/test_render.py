"""The configuration files and command lines the sandbox gives its servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgshovel.sandbox._render import (
    POSTGRES_DURABILITY,
    POSTGRES_INCLUDE_LINE,
    POSTGRES_INCLUDED_FILE,
    initdb_command,
    kafka_command,
    kafka_settings,
    postgres_command,
    render_postgres_conf,
    render_properties,
    zookeeper_command,
    zookeeper_settings,
)


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_zookeeper_config_is_standalone_on_loopback() -> None:
    config = parse(render_properties(zookeeper_settings(Path("/s/zookeeper/data"), 2182)))
    assert config["clientPort"] == "2182"
    assert config["clientPortAddress"] == "127.0.0.1"
    assert config["dataDir"] == "/s/zookeeper/data"
    assert config["admin.enableServer"] == "false"
    assert config["4lw.commands.whitelist"] == "ruok,srvr,stat"
    assert "server.1" not in config


def test_kafka_config_for_one_09_broker_under_a_chroot() -> None:
    config = parse(render_properties(kafka_settings(Path("/s/kafka/logs"), 9093, 2182)))
    assert config["zookeeper.connect"] == "127.0.0.1:2182/kafka"
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:9093"
    assert config["advertised.host.name"] == "127.0.0.1"
    assert config["broker.id"] == "0"
    assert config["log.dirs"] == "/s/kafka/logs"
    assert config["num.partitions"] == "1"
    assert config["offsets.topic.replication.factor"] == "1"
    assert config["group.max.session.timeout.ms"] == "300000"
    for flag in ("auto.create.topics.enable", "delete.topic.enable", "log.cleaner.enable"):
        assert config[flag] == "true"


def test_jvm_commands_use_small_heaps_and_no_pre_java9_flags() -> None:
    zookeeper = zookeeper_command("java", [Path("/j/zookeeper.jar"), Path("/j/x.jar")], Path("z"))
    kafka = kafka_command("java", Path("/k/libs"), Path("/k/server.properties"), Path("/k/l4j"))
    for command in (zookeeper, kafka):
        assert "-Xmx512m" in command
        assert not [flag for flag in command if "ParNew" in flag or "PrintGCDateStamps" in flag]
    assert zookeeper[-2:] == ["org.apache.zookeeper.server.quorum.QuorumPeerMain", "z"]
    assert zookeeper[zookeeper.index("-cp") + 1] == "/j/zookeeper.jar:/j/x.jar"
    assert kafka[kafka.index("-cp") + 1] == "/k/libs/*"
    assert kafka[-2:] == ["kafka.Kafka", "/k/server.properties"]
    assert "-Dlog4j.configuration=file:///k/l4j" in kafka


def test_postgres_command_enables_prepared_transactions_on_loopback() -> None:
    command = postgres_command(Path("/pg/bin"), Path("/d"), Path("/run"), 5433)
    settings = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "-c")
    assert command[:3] == ["/pg/bin/postgres", "-D", "/d"]
    assert settings["port"] == "5433"
    assert settings["listen_addresses"] == "127.0.0.1"
    assert settings["unix_socket_directories"] == "/run"
    assert int(settings["max_prepared_transactions"]) > 0
    assert settings["max_connections"] == "200"


def test_postgres_allows_logical_decoding() -> None:
    command = postgres_command(Path("/pg/bin"), Path("/d"), Path("/run"), 5433)
    settings = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "-c")
    assert settings["wal_level"] == "logical"
    assert int(settings["max_replication_slots"]) > 0
    assert int(settings["max_wal_senders"]) > 0


def test_durability_settings_stay_off_the_command_line_so_alter_system_can_change_them() -> None:
    command = postgres_command(Path("/pg/bin"), Path("/d"), Path("/run"), 5433)
    assert not [a for a in command if a.split("=")[0] in POSTGRES_DURABILITY]
    assert POSTGRES_DURABILITY == {
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    conf = render_postgres_conf(POSTGRES_DURABILITY)
    assert conf.startswith("# ")
    assert conf.splitlines()[1:] == [
        "fsync = 'off'",
        "synchronous_commit = 'off'",
        "full_page_writes = 'off'",
    ]
    assert POSTGRES_INCLUDE_LINE == f"include_if_exists = '{POSTGRES_INCLUDED_FILE}'"


def test_postgres_conf_values_are_quoted_and_one_line() -> None:
    assert render_postgres_conf({"a": "it's"}).splitlines()[1] == "a = 'it''s'"
    with pytest.raises(ValueError, match="one plain line"):
        render_postgres_conf({"a": "x\ny"})


def test_initdb_trusts_local_connections_as_postgres() -> None:
    command = initdb_command(Path("/pg/bin"), Path("/d"))
    assert command[0] == "/pg/bin/initdb"
    assert command[command.index("--auth") + 1] == "trust"
    assert command[command.index("--username") + 1] == "postgres"


def test_property_values_must_be_one_line() -> None:
    with pytest.raises(ValueError, match="one line"):
        render_properties({"a": "x\ny"})
