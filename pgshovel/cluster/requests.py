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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import quote, unquote

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
    #: the copies asked (``copy_name`` of their targets); empty: any worker's
    copies: tuple[str, ...] = ()

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
        copies = document.get("copies") or []
        if not isinstance(copies, list) or not all(isinstance(copy, str) for copy in copies):
            raise ConfigurationError(f"copies {copies!r} are not a list of copy names")
        return cls(
            kind=kind,
            tables=tuple((schema, table) for schema, table in tables),
            where=where,
            repair=repair,
            copies=tuple(copies),
        )

    def asks(self, copy: str) -> bool:
        """Whether the worker of ``copy`` is to answer this request."""
        return not self.copies or copy in self.copies


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
            client.set(path, result.encode())
            return
        except NoNodeError:
            pass
        try:
            acl = set_acl(client, cluster, set_name)
            client.create(path, result.encode(), acl=acl, makepath=True)
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


def wait(
    client: KazooClient, cluster: str, set_name: str, name: str, timeout: float, poll: float = 0.5
) -> Result | None:
    """The result in the request's own node once done or failed (a request naming no copies:
    written by hand, or by an older admin); None if ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    while True:
        result = read_result(client, cluster, set_name, name)
        if answered(result):
            return result
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)
