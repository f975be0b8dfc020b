"""The read-only web console as a Starlette app (``pgshovel.console.server`` serves it).

Routes (GET only; nothing the console does writes anywhere):

* ``/`` every cluster and its sets; ``/clusters/C`` one cluster;
  ``/clusters/C/sets/S`` a set: relay, backlog, copies, progress, last errors,
  lag and throughput charts;
* ``/api/clusters``, ``/api/clusters/C``, ``/api/clusters/C/sets/S``: the same
  data as JSON (``pgshovel.console.reading``).

One ZooKeeper client serves every request, started with the credentials of
the process's environment like every pgshovel command
(``pgshovel.cluster.security``). The console has no authentication of its
own: it listens on loopback unless told otherwise, and then answers only
requests addressed to a loopback name (a web page elsewhere cannot read it
through DNS rebinding). Every response forbids scripts and external content
(Content-Security-Policy). Handlers are synchronous: Starlette runs them in
its thread pool, so a slow database never blocks the event loop.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from pgshovel.cluster import names
from pgshovel.cluster.zookeeper import access_denied
from pgshovel.console import pages, reading
from pgshovel.errors import ConfigurationError, CoordinatorUnavailable

DEFAULT_REFRESH = 5
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
#: no script, no external style, font or image; inline styles only; never framed
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

Reader = Callable[[KazooClient, Request], dict[str, Any]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address to bind) is a loopback one."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _failure(client: KazooClient, error: Exception, request: Request) -> tuple[int, str, str]:
    """(HTTP status, title, one line) for an error while reading what ``request`` asks."""
    if isinstance(error, NoAuthError):
        cluster = request.path_params.get("cluster")
        path = names.cluster_path(cluster) if cluster else "/"
        return 403, "access denied", str(access_denied(client, path))
    if isinstance(error.__cause__, NoAuthError):
        return 403, "access denied", str(error)  # access_denied() already, naming the node
    if isinstance(error, (KazooException, CoordinatorUnavailable)):
        reason = str(error) or type(error).__name__
        return 503, "zookeeper unavailable", f"zookeeper unavailable: {reason}"
    return 404, "not found", str(error)


def create_app(
    zookeeper: Callable[[], KazooClient],
    refresh: int = DEFAULT_REFRESH,
    allowed_hosts: Sequence[str] = ("*",),
) -> Starlette:
    """The console for the ZooKeeper ``zookeeper()`` returns, pages refreshing every
    ``refresh`` seconds, answering requests addressed to ``allowed_hosts``."""

    def respond(
        request: Request, reader: Reader, answer: Callable[[dict[str, Any]], Response]
    ) -> Response:
        client = zookeeper()
        try:
            data = reader(client, request)
        except (ConfigurationError, KazooException, CoordinatorUnavailable) as error:
            status, title, message = _failure(client, error, request)
            if request.url.path.startswith("/api/"):
                return JSONResponse(
                    {"error": message}, status_code=status, headers=SECURITY_HEADERS
                )
            page = pages.error_page(title, message, refresh, now=time.time())
            return HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)
        return answer(data)

    def html(reader: Reader, render: Callable[[dict[str, Any], int], str]) -> Callable[..., Any]:
        def endpoint(request: Request) -> Response:
            return respond(
                request,
                reader,
                lambda data: HTMLResponse(render(data, refresh), headers=SECURITY_HEADERS),
            )

        return endpoint

    def api(reader: Reader) -> Callable[..., Any]:
        def endpoint(request: Request) -> Response:
            return respond(
                request, reader, lambda data: JSONResponse(data, headers=SECURITY_HEADERS)
            )

        return endpoint

    routes = [
        Route("/", html(_overview, pages.overview_page)),
        Route("/clusters/{cluster}", html(_cluster, pages.overview_page)),
        Route("/clusters/{cluster}/sets/{set}", html(_set, pages.set_page)),
        Route("/api/clusters", api(_overview)),
        Route("/api/clusters/{cluster}", api(_cluster_data)),
        Route("/api/clusters/{cluster}/sets/{set}", api(_set)),
        Route("/favicon.ico", lambda _request: Response(status_code=204)),
    ]
    return Starlette(
        routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)]
    )


def _overview(client: KazooClient, _request: Request) -> dict[str, Any]:
    return reading.overview(client)


def _cluster_name(request: Request) -> str:
    return names.validate_cluster_name(str(request.path_params["cluster"]))


def _cluster(client: KazooClient, request: Request) -> dict[str, Any]:
    """The overview page's data, of one cluster."""
    name = _cluster_name(request)
    if name not in reading.cluster_names(client):
        raise ConfigurationError(f"no cluster {name!r} in this zookeeper")
    return {"now": time.time(), "clusters": [reading.cluster(client, name)]}


def _cluster_data(client: KazooClient, request: Request) -> dict[str, Any]:
    return _cluster(client, request)["clusters"][0]  # type: ignore[no-any-return]


def _set(client: KazooClient, request: Request) -> dict[str, Any]:
    set_name = names.validate_set_name(str(request.path_params["set"]))
    return reading.set_detail(client, _cluster_name(request), set_name)
