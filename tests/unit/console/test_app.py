"""What the console answers when reading fails: access denied, ZooKeeper away, nothing there."""

from __future__ import annotations

from types import SimpleNamespace

from kazoo.exceptions import ConnectionLoss, NoAuthError
from starlette.requests import Request

from pgshovel.cluster.zookeeper import access_denied
from pgshovel.console.app import _failure
from pgshovel.errors import ConfigurationError

CLIENT = SimpleNamespace(auth_data=[("digest", "ops:secret")])


def request(**path_params: str) -> Request:
    return Request({"type": "http", "path_params": path_params, "headers": []})


def test_access_denied_names_the_cluster_and_the_variable_never_the_password() -> None:
    status, title, message = _failure(CLIENT, NoAuthError(), request(cluster="main"))
    assert (status, title) == (403, "access denied")
    assert "'/main'" in message and "PGSHOVEL_ZOOKEEPER_AUTH" in message
    assert "digest user 'ops'" in message and "secret" not in message
    try:
        raise access_denied(CLIENT, "/main/sets/orders") from NoAuthError()
    except ConfigurationError as error:
        status, _, message = _failure(CLIENT, error, request(cluster="main"))
    assert status == 403 and "'/main/sets/orders'" in message


def test_zookeeper_away_is_503_and_a_missing_set_404() -> None:
    status, _, message = _failure(CLIENT, ConnectionLoss(), request())
    assert status == 503 and message == "zookeeper unavailable: ConnectionLoss"
    missing = ConfigurationError("set 'x' does not exist in cluster 'main'")
    assert _failure(CLIENT, missing, request())[:2] == (404, "not found")
