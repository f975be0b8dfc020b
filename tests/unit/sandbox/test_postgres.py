"""The sandbox's PostgreSQL data directory: the durability settings ALTER SYSTEM may override."""

from __future__ import annotations

import os
from pathlib import Path

from pgshovel.sandbox._plan import PostgresLocation
from pgshovel.sandbox._postgres import ServerUser, _write_durability_settings
from pgshovel.sandbox._render import POSTGRES_INCLUDE_LINE, POSTGRES_INCLUDED_FILE


def test_every_start_rewrites_the_included_file_and_includes_it_once(tmp_path: Path) -> None:
    location = PostgresLocation(tmp_path)
    location.data_dir.mkdir()
    conf = location.data_dir / "postgresql.conf"
    conf.write_text("max_connections = 100\n")
    me = ServerUser("me", os.getuid(), os.getgid(), tmp_path, switch=False)

    _write_durability_settings(location, me)
    (location.data_dir / POSTGRES_INCLUDED_FILE).write_text("fsync = 'on'\n")
    _write_durability_settings(location, me)

    assert conf.read_text().splitlines().count(POSTGRES_INCLUDE_LINE) == 1
    assert conf.read_text().startswith("max_connections = 100\n")
    included = (location.data_dir / POSTGRES_INCLUDED_FILE).read_text()
    assert "fsync = 'off'" in included.splitlines()
