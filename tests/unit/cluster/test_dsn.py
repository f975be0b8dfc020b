"""DSNs are shown without their passwords, and a set's DSN (stored in ZooKeeper) holds none."""

from __future__ import annotations

import pytest

from pgshovel.cluster.dsn import (
    MAINTAINED_SECRETS,
    has_password,
    libpq_secrets,
    mask_dsn,
    refuse_password,
    secret_keywords,
    stored_password_warning,
)
from pgshovel.errors import ConfigurationError


def test_passwords_never_show() -> None:
    assert "hunter2" not in mask_dsn("host=db user=app password=hunter2")
    masked = mask_dsn("postgresql://app:hunter2@db:5432/app")
    assert "hunter2" not in masked and "dbname=app" in masked
    assert mask_dsn("dbname=app") == "dbname=app"
    assert mask_dsn("host='unterminated") == "<unparseable dsn>"


def test_a_password_in_either_form_is_found() -> None:
    assert has_password("host=db password=hunter2")
    assert has_password("postgresql://app:hunter2@db/app")
    assert has_password("postgresql://app@db/app?password=hunter2")
    assert not has_password("host=db user=app passfile=/etc/pgshovel/pgpass")
    assert not has_password("service=orders password=")
    assert not has_password("postgresql://app@db/app")


def test_set_dsns_with_a_password_are_refused_with_the_remedy() -> None:
    refuse_password("orders", "host=db dbname=app")
    with pytest.raises(ConfigurationError) as raised:
        refuse_password("orders", "postgresql://app:hunter2@db/app")
    message = str(raised.value)
    assert message.startswith("set 'orders': database.dsn ")
    assert "hunter2" not in message
    assert all(remedy in message for remedy in ("passfile", "service=", "PGPASSWORD"))


def test_stored_passwords_are_flagged() -> None:
    assert stored_password_warning("orders", "host=db") is None
    warning = stored_password_warning("orders", "host=db password=hunter2")
    assert warning is not None and "hunter2" not in warning
    assert "'orders'" in warning and "pgshovel-admin set update" in warning


def test_libpq_names_its_secret_keywords() -> None:
    """The list comes from the libpq psycopg2 runs with, not only from pgshovel's own list."""
    assert {"password", "sslpassword"} <= libpq_secrets()
    assert libpq_secrets() <= secret_keywords()
    assert MAINTAINED_SECRETS <= secret_keywords()
    assert not {"user", "sslkey", "passfile", "service"} & secret_keywords()


def test_every_secret_keyword_is_masked() -> None:
    masked = mask_dsn("host=db sslkey=/k.pem sslpassword=opensesame")
    assert "opensesame" not in masked and "sslkey=/k.pem" in masked
    masked = mask_dsn("postgresql://app:hunter2@db/app?sslpassword=opensesame")
    assert "opensesame" not in masked and "hunter2" not in masked


def test_a_set_dsn_with_an_sslpassword_is_refused_like_a_password() -> None:
    assert has_password("host=db sslpassword=opensesame")
    assert has_password("postgresql://app@db/app?sslpassword=opensesame")
    with pytest.raises(ConfigurationError) as raised:
        refuse_password("orders", "host=db sslkey=/k.pem sslpassword=opensesame")
    message = str(raised.value)
    assert message.startswith("set 'orders': database.dsn ")
    assert "holds a secret (sslpassword=...)" in message and "opensesame" not in message
    assert "service=NAME" in message and "pg_service.conf" in message
    warning = stored_password_warning("orders", "host=db sslpassword=opensesame")
    assert warning is not None and "opensesame" not in warning and "sslpassword" in warning
