"""DSNs are shown without their passwords, in key=value and URI form."""

from __future__ import annotations

from pgshovel.cluster.dsn import mask_dsn


def test_passwords_never_show() -> None:
    assert "hunter2" not in mask_dsn("host=db user=app password=hunter2")
    masked = mask_dsn("postgresql://app:hunter2@db:5432/app")
    assert "hunter2" not in masked and "dbname=app" in masked
    assert mask_dsn("dbname=app") == "dbname=app"
    assert mask_dsn("host='unterminated") == "<unparseable dsn>"
