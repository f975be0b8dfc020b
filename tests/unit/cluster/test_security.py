"""ZooKeeper credentials and ACLs from the environment: parsed strictly, passwords never echoed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kazoo.security import ACL, CREATOR_ALL_ACL, Id, Permissions

from pgshovel.cluster import security
from pgshovel.errors import ConfigurationError

AUTH = security.AUTH_VARIABLE
AUTH_FILE = security.AUTH_FILE_VARIABLE
ACL_VARIABLE = security.ACL_VARIABLE


def test_without_credentials_nothing_changes() -> None:
    settings = security.from_environment({})
    assert settings.client_options() == {"auth_data": None, "default_acl": None}
    assert settings.identity == "an unauthenticated client"


def test_credentials_make_created_nodes_creator_only() -> None:
    settings = security.from_environment({AUTH: "digest:pgshovel:s3:cr:et"})
    # The password may hold ':'; only the first two separate scheme and user.
    assert settings.client_options() == {
        "auth_data": [("digest", "pgshovel:s3:cr:et")],
        "default_acl": list(CREATOR_ALL_ACL),
    }
    assert settings.identity == "digest user 'pgshovel'"


def test_credentials_from_a_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "zookeeper.auth"
    path.write_text("digest:relay:from-file\n")
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING):
        settings = security.from_environment({AUTH_FILE: str(path)})
    assert settings.auth == (("digest", "relay:from-file"),)
    assert caplog.records == []
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        security.from_environment({AUTH_FILE: str(path)})
    assert "chmod 600" in caplog.text and "from-file" not in caplog.text


def test_unreadable_file_and_two_sources_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        security.from_environment({AUTH_FILE: str(tmp_path / "missing")})
    with pytest.raises(ConfigurationError, match="set only one of them"):
        security.from_environment({AUTH: "digest:a:b", AUTH_FILE: str(tmp_path / "x")})


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("pgshovel:hunter2", "unsupported zookeeper auth scheme 'pgshovel'"),
        ("sasl:user:hunter2", "SASL is not supported yet"),
        ("digest:user", "non-empty user and password"),
        ("digest:user:", "non-empty user and password"),
        ("digest::hunter2", "non-empty user and password"),
        ("hunter2", "scheme (not shown)"),
    ],
)
def test_malformed_credentials_name_the_variable_not_the_password(
    value: str, fragment: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        security.from_environment({AUTH: value})
    message = str(raised.value)
    assert message.startswith(f"{AUTH}: ") and fragment in message
    assert "hunter2" not in message


def test_explicit_acl_replaces_the_default() -> None:
    settings = security.from_environment(
        {
            AUTH: "digest:admin:pw",
            ACL_VARIABLE: "auth::cdrwa, digest:relay:Zm9vYmFy:r,ip:10.0.0.0/8:rw",
        }
    )
    assert settings.acl == (
        ACL(Permissions.ALL, Id("auth", "")),
        ACL(Permissions.READ, Id("digest", "relay:Zm9vYmFy")),
        ACL(Permissions.READ | Permissions.WRITE, Id("ip", "10.0.0.0/8")),
    )
    # Without credentials an explicit ACL still applies (ip, world, digest of others).
    assert security.from_environment({ACL_VARIABLE: "world:anyone:r"}).acl == (
        ACL(Permissions.READ, Id("world", "anyone")),
    )


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("auth::cdrwa", "no credentials are given"),
        ("digest:relay:hash:rx", "letters of 'cdrwa'"),
        ("digest:relay", "expected scheme:id:perms"),
        ("kerberos:x:r", "expected scheme:id:perms"),
        (" , ", "no ACL entry given"),
    ],
)
def test_malformed_acl_is_refused(value: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=ACL_VARIABLE) as raised:
        security.from_environment({ACL_VARIABLE: value})
    assert fragment in str(raised.value)
