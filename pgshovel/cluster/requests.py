"""Requests to a set's replication worker through ZooKeeper, and the worker's answers.

``pgshovel-admin set resnapshot`` and ``set verify`` create a sequential node
under ``/<cluster>/sets/<set>/requests``; the worker, wherever it runs, takes it
between micro-batches, records the work in its target (so a restart resumes
it), writes its progress and finally its report to
``/<cluster>/sets/<set>/results/<request>``, and removes the request. The
command waits for the report. Both sides use the JSON forms defined here.
Request and result nodes get the ACL of their set's node, whoever creates
them: the worker that reads the set reads its requests (a request written with
credentials the worker lacks blocked every later one). A node the client may
not use is a ``ConfigurationError`` naming it; ``pending`` lists a request node
it cannot read, or that holds no request, with that reason, so the worker can
refuse it and go on with the next.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.security import ACL

from pgshovel.cluster import names
from pgshovel.cluster.zookeeper import authorized
from pgshovel.errors import ConfigurationError

Kind = Literal["resnapshot", "verify"]
Status = Literal["pending", "running", "done", "failed"]


@dataclass(frozen=True)
class Request:
    """What a command asks the worker to do."""

    kind: Kind
    #: (schema, table) pairs; empty: every table of the set
    tables: tuple[tuple[str, str], ...] = ()
    where: str = ""
    repair: bool = False

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> Request:
        """The request a node holds; a ``ConfigurationError`` saying what is wrong with it."""
        try:
            document = json.loads(data.decode())
        except (UnicodeDecodeError, ValueError) as error:
            raise ConfigurationError(f"it holds no JSON ({error})") from error
        if not isinstance(document, dict):
            raise ConfigurationError(f"it holds {type(document).__name__}, not an object")
        kind = document.get("kind")
        if kind not in ("resnapshot", "verify"):
            raise ConfigurationError(f"kind {kind!r} is neither 'resnapshot' nor 'verify'")
        tables = document.get("tables") or []
        if not isinstance(tables, list) or not all(
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(part, str) and part for part in pair)
            for pair in tables
        ):
            raise ConfigurationError(f"tables {tables!r} are not [schema, table] pairs")
        where, repair = document.get("where") or "", document.get("repair") or False
        if not isinstance(where, str) or not isinstance(repair, bool):
            raise ConfigurationError(
                f"where {where!r} is not text or repair {repair!r} is not true/false"
            )
        return cls(
            kind=kind,
            tables=tuple((schema, table) for schema, table in tables),
            where=where,
            repair=repair,
        )


@dataclass(frozen=True)
class Queued:
    """A request node: its request, or why it cannot be taken."""

    name: str
    request: Request | None
    problem: str = ""


@dataclass(frozen=True)
class TableReport:
    """What the worker did for one table of a request."""

    schema: str
    table: str
    purpose: str
    ranges: int = 0
    rows: int = 0
    #: verify: (range index, lower bound, upper bound, source rows, copy rows, differing buckets)
    differences: tuple[tuple[Any, ...], ...] = ()


@dataclass(frozen=True)
class Result:
    """The worker's answer to a request (progress until ``status`` is done or failed)."""

    status: Status
    message: str = ""
    tables: tuple[TableReport, ...] = field(default=())

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> Result:
        """The result a node holds; a ``ConfigurationError`` when it holds none."""
        try:
            document = json.loads(data.decode())
            status = document["status"]
            if status not in ("pending", "running", "done", "failed"):
                raise ValueError(f"unknown status {status!r}")
            return cls(
                status=status,
                message=str(document.get("message") or ""),
                tables=tuple(
                    TableReport(
                        schema=item["schema"],
                        table=item["table"],
                        purpose=item["purpose"],
                        ranges=int(item.get("ranges") or 0),
                        rows=int(item.get("rows") or 0),
                        differences=tuple(tuple(d) for d in item.get("differences") or ()),
                    )
                    for item in document.get("tables") or ()
                ),
            )
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ConfigurationError(f"it holds no result ({error!r})") from error

    def with_table(self, report: TableReport) -> Result:
        return Result(self.status, self.message, (*self.tables, report))


def set_acl(client: KazooClient, cluster: str, set_name: str) -> list[ACL]:
    """The ACL of the set's node: what its request and result nodes get."""
    path = names.set_path(cluster, set_name)
    with authorized(client, path):
        acl, _ = client.get_acls(path)
    return list(acl)


def submit(client: KazooClient, cluster: str, set_name: str, request: Request) -> str:
    """Create the request; its node name (the key of its result)."""
    if client.exists(names.set_path(cluster, set_name)) is None:
        raise ConfigurationError(
            f"set {set_name!r} does not exist in cluster {cluster!r}; see 'pgshovel-admin set list'"
        )
    acl = set_acl(client, cluster, set_name)
    with authorized(client, names.set_path(cluster, set_name)):
        client.ensure_path(names.requests_path(cluster, set_name), acl=acl)
        client.ensure_path(names.results_path(cluster, set_name), acl=acl)
        path = client.create(
            f"{names.requests_path(cluster, set_name)}/request-",
            request.encode(),
            acl=acl,
            sequence=True,
        )
    name = str(path).rsplit("/", 1)[1]
    write_result(client, cluster, set_name, name, Result("pending"), acl)
    return name


def write_result(
    client: KazooClient,
    cluster: str,
    set_name: str,
    name: str,
    result: Result,
    acl: list[ACL] | None = None,
) -> None:
    path = f"{names.results_path(cluster, set_name)}/{name}"
    with authorized(client, path):
        try:
            client.set(path, result.encode())
            return
        except NoNodeError:
            pass
        try:
            if acl is None:
                acl = set_acl(client, cluster, set_name)
            client.create(path, result.encode(), acl=acl, makepath=True)
        except NodeExistsError:
            client.set(path, result.encode())


def read_result(client: KazooClient, cluster: str, set_name: str, name: str) -> Result | None:
    path = f"{names.results_path(cluster, set_name)}/{name}"
    try:
        with authorized(client, path):
            data, _ = client.get(path)
    except NoNodeError:
        return None
    return Result.decode(data)


def pending(client: KazooClient, cluster: str, set_name: str) -> list[Queued]:
    """The requests not answered yet, oldest first; a node that cannot be read or holds no
    request comes with the reason instead (it never hides the ones after it)."""
    path = names.requests_path(cluster, set_name)
    try:
        with authorized(client, path):
            children = sorted(client.get_children(path))
    except NoNodeError:
        return []
    found = []
    for name in children:
        try:
            with authorized(client, f"{path}/{name}"):
                data, _ = client.get(f"{path}/{name}")
            found.append(Queued(name, Request.decode(data)))
        except NoNodeError:
            continue
        except ConfigurationError as error:
            found.append(Queued(name, None, f"request {name} cannot be taken: {error}"))
    return found


def remove_request(client: KazooClient, cluster: str, set_name: str, name: str) -> None:
    path = f"{names.requests_path(cluster, set_name)}/{name}"
    try:
        with authorized(client, path):
            client.delete(path)
    except NoNodeError:
        pass


def wait(
    client: KazooClient, cluster: str, set_name: str, name: str, timeout: float, poll: float = 0.5
) -> Result | None:
    """The request's result once done or failed; None if ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    while True:
        result = read_result(client, cluster, set_name, name)
        if result is not None and result.status in ("done", "failed"):
            return result
        if time.monotonic() >= deadline:
            return result if result is not None and result.status in ("done", "failed") else None
        time.sleep(poll)
