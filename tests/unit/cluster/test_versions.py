"""Set versions (a hash of the configuration) and release ordering."""

from __future__ import annotations

from pgshovel.cluster.versions import is_newer, set_version
from pgshovel.protocol import configuration_pb2


def _configuration(*tables: str) -> configuration_pb2.ReplicationSetConfiguration:
    configuration = configuration_pb2.ReplicationSetConfiguration()
    configuration.database.dsn = "dbname=app"
    for name in tables:
        configuration.tables.add(schema="public", name=name)
    return configuration


def test_equal_configurations_have_equal_versions_and_changes_change_it() -> None:
    version = set_version(_configuration("a", "b"))
    assert version == set_version(_configuration("a", "b"))
    assert len(version) == 16 and int(version, 16) >= 0
    assert version != set_version(_configuration("a"))
    changed = _configuration("a", "b")
    changed.tables[0].columns.append("id")
    assert version != set_version(changed)


def test_release_ordering_is_numeric() -> None:
    assert is_newer("0.10.0", "0.9.1")
    assert not is_newer("0.1", "0.1.0")
    assert not is_newer("0.1.0", "0.2.0")
