"""Requests to a set's replication worker through ZooKeeper, and the worker's answers.

``pgshovel-admin set resnapshot`` and ``set verify`` create a sequential node
under ``/<cluster>/sets/<set>/requests`` naming the copies it asks (those of the
workers running then). Every worker of such a copy, wherever it runs, takes it
between micro-batches, records the work in its target (so a restart resumes
it), and writes its progress and finally its report under
``/<cluster>/sets/<set>/results/<request>/<copy>``: one answer per copy, so
two copies of a set (a PostgreSQL and a Parquet worker) never write over each
other's report. Whoever sees the last copy answer (the command, or the
worker) removes the request. Both sides use the JSON forms defined here.
The nodes get the ACL of the process that creates them (see
``pgshovel.cluster.security``); a node the client may not use is a
``ConfigurationError`` naming it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import quote, unquote

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
    #: the copies asked (``copy_name`` of their targets); empty: any worker's
    copies: tuple[str, ...] = ()

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
            copies=tuple(str(copy) for copy in document.get("copies") or ()),
        )

    def asks(self, copy: str) -> bool:
        """Whether the worker of ``copy`` is to answer this request."""
        return not self.copies or copy in self.copies


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


def copy_key(copy: str) -> str:
    """A copy's name as a ZooKeeper node name (``/`` and ``%`` escaped)."""
    return quote(copy, safe="")


def _copy_path(cluster: str, set_name: str, name: str, copy: str) -> str:
    return f"{names.results_path(cluster, set_name)}/{name}/{copy_key(copy)}"


def write_copy_result(
    client: KazooClient, cluster: str, set_name: str, name: str, copy: str, result: Result
) -> None:
    """The answer of ``copy`` to request ``name`` (progress, then done or failed)."""
    path = _copy_path(cluster, set_name, name, copy)
    with authorized(client, path):
        try:
            client.create(path, result.encode(), makepath=True)
        except NodeExistsError:
            client.set(path, result.encode())


def read_copy_result(
    client: KazooClient, cluster: str, set_name: str, name: str, copy: str
) -> Result | None:
    path = _copy_path(cluster, set_name, name, copy)
    try:
        with authorized(client, path):
            data, _ = client.get(path)
    except NoNodeError:
        return None
    return Result.decode(data)


def read_copy_results(
    client: KazooClient, cluster: str, set_name: str, name: str
) -> dict[str, Result]:
    """Every copy's answer to request ``name`` so far, by copy name."""
    path = f"{names.results_path(cluster, set_name)}/{name}"
    try:
        with authorized(client, path):
            children = sorted(client.get_children(path))
    except NoNodeError:
        return {}
    answers = {}
    for child in children:
        result = read_copy_result(client, cluster, set_name, name, unquote(child))
        if result is not None:
            answers[unquote(child)] = result
    return answers


def answered(result: Result | None) -> bool:
    return result is not None and result.status in ("done", "failed")


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


def wait_copies(
    client: KazooClient,
    cluster: str,
    set_name: str,
    name: str,
    copies: Sequence[str],
    timeout: float,
    poll: float = 0.5,
) -> dict[str, Result]:
    """The answers of ``copies`` to request ``name`` once each is done or failed, or those
    there are when ``timeout`` passed; then the request is removed if every copy answered.

    A worker of a version before per-copy answers writes the request's own node: that
    answer counts for every copy.
    """
    deadline = time.monotonic() + timeout
    while True:
        answers = {
            copy: result
            for copy, result in read_copy_results(client, cluster, set_name, name).items()
            if answered(result)
        }
        older = read_result(client, cluster, set_name, name)
        if older is not None and answered(older):
            answers.update({copy: older for copy in copies if copy not in answers})
        if all(copy in answers for copy in copies):
            remove_request(client, cluster, set_name, name)
            return answers
        if time.monotonic() >= deadline:
            return answers
        time.sleep(poll)
