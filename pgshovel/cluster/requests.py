"""Requests to a set's replication worker through ZooKeeper, and the worker's answers.

``pgshovel-admin set resnapshot`` and ``set verify`` create a sequential node
under ``/<cluster>/sets/<set>/requests``; the worker, wherever it runs, takes it
between micro-batches, records the work in its target (so a restart resumes
it), writes its progress and finally its report to
``/<cluster>/sets/<set>/results/<request>``, and removes the request. The
command waits for the report. Both sides use the JSON forms defined here.
The nodes get the ACL of the process that creates them (see
``pgshovel.cluster.security``); a node the client may not use is a
``ConfigurationError`` naming it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

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
        document = json.loads(data.decode())
        return cls(
            kind=document["kind"],
            tables=tuple((str(s), str(t)) for s, t in document.get("tables") or ()),
            where=str(document.get("where") or ""),
            repair=bool(document.get("repair")),
        )


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
        document = json.loads(data.decode())
        return cls(
            status=document["status"],
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

    def with_table(self, report: TableReport) -> Result:
        return Result(self.status, self.message, (*self.tables, report))


def submit(client: KazooClient, cluster: str, set_name: str, request: Request) -> str:
    """Create the request; its node name (the key of its result)."""
    if client.exists(names.set_path(cluster, set_name)) is None:
        raise ConfigurationError(
            f"set {set_name!r} does not exist in cluster {cluster!r}; see 'pgshovel-admin set list'"
        )
    with authorized(client, names.set_path(cluster, set_name)):
        client.ensure_path(names.requests_path(cluster, set_name))
        client.ensure_path(names.results_path(cluster, set_name))
        path = client.create(
            f"{names.requests_path(cluster, set_name)}/request-", request.encode(), sequence=True
        )
    name = str(path).rsplit("/", 1)[1]
    write_result(client, cluster, set_name, name, Result("pending"))
    return name


def write_result(
    client: KazooClient, cluster: str, set_name: str, name: str, result: Result
) -> None:
    path = f"{names.results_path(cluster, set_name)}/{name}"
    with authorized(client, path):
        try:
            client.create(path, result.encode(), makepath=True)
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


def pending(client: KazooClient, cluster: str, set_name: str) -> list[tuple[str, Request]]:
    """The requests not answered yet, oldest first."""
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
        except NoNodeError:
            continue
        found.append((name, Request.decode(data)))
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
