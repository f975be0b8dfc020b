"""Binding the console's address: loopback detection, the URL announced, a port in use."""

from __future__ import annotations

import socket

import pytest

from pgshovel.console.app import is_loopback
from pgshovel.console.server import bind, url_of
from pgshovel.errors import ConfigurationError


def test_loopback_names_and_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.3.2.1") and is_loopback("localhost")
    assert is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    assert not is_loopback("console.example.org")


def test_port_zero_gets_a_free_port_and_its_url() -> None:
    listener = bind("127.0.0.1", 0)
    try:
        port = listener.getsockname()[1]
        assert port > 0
        assert url_of(listener) == f"http://127.0.0.1:{port}/"
    finally:
        listener.close()


def test_a_port_in_use_is_one_line_naming_it() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ConfigurationError, match=f"port {port} on 127.0.0.1 is already in use"):
            bind("127.0.0.1", port)
    finally:
        taken.close()


def test_without_the_console_extra_one_line_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from pgshovel.console import require_console

    require_console()  # the dev extra has it
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "uvicorn" else real(name)
    )
    with pytest.raises(
        ConfigurationError, match=r"needs uvicorn: pip install 'pgshovel\[console\]'"
    ):
        require_console()
