"""A set's watch: ordered updates, change, move and drop events, and what a change is called."""

from __future__ import annotations

import logging

import pytest
from kazoo.protocol.states import ZnodeStat

from pgshovel.cluster.versions import set_version
from pgshovel.cluster.watch import SetWatch, describe_changes
from pgshovel.protocol import configuration_pb2

SetConfiguration = configuration_pb2.ReplicationSetConfiguration


def configuration(
    dsn: str = "host=a dbname=shop", tables: tuple[str, ...] = ("items",), **table: object
) -> SetConfiguration:
    value = SetConfiguration()
    value.database.dsn = dsn
    for name in tables:
        value.tables.add(name=name, schema="public", **table)
    return value


def stat(zxid: int, version: int = 0) -> ZnodeStat:
    return ZnodeStat(1, zxid, 0, 0, version, 0, 0, 0, 0, 0, zxid)


def watching(value: SetConfiguration, zxid: int = 10) -> SetWatch:
    watch = SetWatch.fixed("shop", value)
    watch.update(value.SerializeToString(), stat(zxid))
    return watch


def test_a_change_is_taken_in_order_and_flagged() -> None:
    watch = watching(configuration())
    assert not watch.changed.is_set()
    newer = configuration(tables=("items", "orders"))
    assert watch.update(newer.SerializeToString(), stat(12, 1))
    current = watch.current()
    assert (current.configuration, current.version) == (newer, set_version(newer))
    assert (current.node_version, current.zxid) == (1, 12)
    assert watch.changed.is_set() and not watch.moved.is_set()
    # A notification older than what a refresh already read changes nothing.
    watch.update(configuration().SerializeToString(), stat(11))
    assert watch.current().configuration == newer


def test_a_move_sets_moved_until_the_process_follows_it() -> None:
    watch = watching(configuration())
    assert watch.follow().dsn == "host=a dbname=shop"
    watch.update(configuration(dsn="host=b dbname=shop").SerializeToString(), stat(13))
    assert watch.moved.is_set()
    assert watch.follow().dsn == "host=b dbname=shop"
    assert not watch.moved.is_set()


def test_a_dropped_set_keeps_its_last_configuration() -> None:
    watch = watching(configuration())
    assert watch.exists
    watch.update(None, None)
    assert not watch.exists and watch.dropped.is_set()
    assert watch.current().configuration == configuration()


def test_listeners_hear_every_change_once(caplog: pytest.LogCaptureFixture) -> None:
    watch = watching(configuration())
    heard: list[tuple[str, str]] = []
    watch.on_change(lambda old, new: heard.append((old.version, new.version)))
    newer = configuration(tables=("items",), key_columns=["code"])
    with caplog.at_level(logging.INFO):
        watch.update(newer.SerializeToString(), stat(14))
        watch.update(newer.SerializeToString(), stat(15))  # the same data again
    assert heard == [(set_version(configuration()), set_version(newer))]
    assert "changed: version" in caplog.text
    assert "table 'public'.'items': key columns [] -> ['code']" in caplog.text


def test_an_undecodable_node_keeps_the_last_configuration() -> None:
    watch = watching(configuration())
    assert watch.update(b"\xff\xff not a protobuf", stat(16))
    assert watch.current().configuration == configuration()


def test_a_closed_watch_ends_the_data_watch() -> None:
    watch = watching(configuration())
    watch.close()
    assert watch.update(configuration(tables=("x",)).SerializeToString(), stat(17)) is False


def test_changes_are_described_table_by_table_without_passwords() -> None:
    old = configuration(dsn="host=a password=secret", tables=("items", "gone"))
    new = configuration(dsn="host=b password=secret", tables=("items", "late"))
    new.tables[0].key_columns.append("code")
    new.tables[0].columns.extend(["code", "v"])
    new.tables[0].provenance = True
    new.allow_unkeyed = True
    phrases = describe_changes(old, new)
    assert phrases == [
        "table 'public'.'late' joined the set",
        "table 'public'.'gone' left the set",
        "table 'public'.'items': key columns [] -> ['code']",
        "table 'public'.'items': captured columns 'all' -> ['code', 'v']",
        "table 'public'.'items': provenance on",
        "allow_unkeyed true",
        "database 'password=******** host=a' -> 'password=******** host=b'",
    ]
    assert "secret" not in " ".join(phrases)
