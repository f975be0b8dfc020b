"""``pgshovel-admin serve``: bind the console's address, connect to ZooKeeper, run uvicorn.

The socket is bound here, before uvicorn starts, so a port in use is one
``ConfigurationError`` naming it and port 0 gets a free port whose URL is
announced. SIGINT or SIGTERM stop the server gracefully and the command
exits 0 (a second SIGINT stops it at once); uvicorn's own logging goes through
the command's handlers, at WARNING, with no access log.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import socket
from collections.abc import Callable, Iterator

import uvicorn

from pgshovel.cluster.zookeeper import start_client
from pgshovel.console.app import LOOPBACK_NAMES, create_app, is_loopback
from pgshovel.errors import ConfigurationError

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8640


class _Server(uvicorn.Server):
    """uvicorn's server, without raising the stop signal again once it has stopped."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {number: signal.signal(number, self.handle_exit) for number in handled}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a ``ConfigurationError`` naming what is wrong."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise ConfigurationError(
            f"cannot listen on {host!r}: {error.strerror}; check --host"
        ) from error
    listener = socket.socket(family, kind, protocol)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
    except OSError as error:
        listener.close()
        if error.errno == errno.EADDRINUSE:
            raise ConfigurationError(
                f"port {port} on {host} is already in use; pass another --port (0: any free port)"
            ) from error
        raise ConfigurationError(
            f"cannot listen on {host}:{port}: {error.strerror or error}; check --host and --port"
        ) from error
    return listener


def url_of(listener: socket.socket) -> str:
    """``http://host:port/`` of a bound socket (IPv6 addresses in brackets)."""
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(
    zookeeper_hosts: str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    refresh: int = 5,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the console until SIGINT or SIGTERM; ``announce`` gets its URL once it listens."""
    listener = bind(host, port)
    try:
        client = start_client(zookeeper_hosts)
        try:
            loopback = is_loopback(host)
            if not loopback:
                logger.warning(
                    "the console listens on %s and has no authentication of its own: anyone "
                    "who reaches it sees the clusters' status; put it behind a proxy that "
                    "authenticates",
                    host,
                )
            app = create_app(
                lambda: client, refresh, allowed_hosts=LOOPBACK_NAMES if loopback else ("*",)
            )
            config = uvicorn.Config(
                app,
                log_config=None,
                log_level="warning",
                access_log=False,
                lifespan="off",
                server_header=False,
            )
            announce(url_of(listener))
            _Server(config).run(sockets=[listener])
        finally:
            client.stop()
            client.close()
    finally:
        listener.close()
