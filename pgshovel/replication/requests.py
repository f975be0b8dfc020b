"""The worker's side of requests through ZooKeeper: re-snapshot and verify (with repair).

Between micro-batches the worker looks for new requests (at most once a
second), checks them (tables of the set; a ``--where`` filter must be one
read-only boolean expression of the captured columns, see
``pgshovel.source.check_filter``), turns them into snapshot tasks stored in
its state (a restart resumes them), and reports: ``running`` when taken, one
table report per finished task, ``done`` when every task of the request is
finished, ``failed`` with the reason when it cannot be done: a request node
that holds no request or cannot be read, one the checks refuse, or one whose
reads or merges fail for a lasting reason. Refusing a request never stops the
worker or the requests after it. Every answer is this copy's, under its name
(``copy_name`` of the target): another worker's copy of the same set answers
the same request on its own, and the request goes once every copy it asks has
answered. A verify with
repair that found differing ranges copies just those ranges again, then
verifies them again, before the request is done: whether a verify repairs is
stored with its task (``SnapshotTask.repair``), so every table of the request
is repaired, and a restart in the middle changes nothing.
"""

from __future__ import annotations

import logging
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from pgshovel.abc import ChunkTarget, Target
from pgshovel.cluster import requests
from pgshovel.cluster.requests import Request, Result, TableReport
from pgshovel.cluster.zookeeper import start_client
from pgshovel.errors import ConfigurationError, PgshovelError, TransientError
from pgshovel.replication.incremental import new_task
from pgshovel.replication.targets import copy_name
from pgshovel.source import TableShape, check_filter, check_filter_text, connect
from pgshovel.stream.state import Purpose, SnapshotTask, WorkerState

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0


class RequestDesk:
    """Takes a set's requests, turns them into tasks, and answers them."""

    def __init__(
        self, zookeeper_hosts: str, cluster: str, set_name: str, source_dsn: str, target: Target
    ) -> None:
        self.zookeeper_hosts = zookeeper_hosts
        self.cluster = cluster
        self.set_name = set_name
        self.source_dsn = source_dsn
        self.target = target
        #: the name this worker answers under
        self.copy = copy_name(target)
        self._client: KazooClient | None = None
        #: the status board's thread asks for the client too
        self._client_lock = threading.Lock()
        self._next_poll = 0.0
        #: requests refused whose answer ZooKeeper did not take: skipped from now on
        self._refused: set[str] = set()
        #: the requests seen, by name (what their answers go with)
        self._requests: dict[str, Request] = {}
        #: why the requests could not be read at the last poll ("" when they could)
        self._unread = ""

    def close(self) -> None:
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None

    def zookeeper(self) -> KazooClient:
        """The desk's ZooKeeper client, started on first use (the status board shares it)."""
        with self._client_lock:
            if self._client is None:
                self._client = start_client(self.zookeeper_hosts)
            return self._client

    def take(self, state: WorkerState) -> WorkerState:
        """``state`` with the tasks of requests not taken yet (polled at most once a second).

        A request that cannot be carried out is refused with its reason; it never stops
        the worker or the requests after it."""
        now = time.monotonic()
        if now < self._next_poll:
            return state
        self._next_poll = now + POLL_SECONDS
        try:
            client = self.zookeeper()
            found = requests.pending(client, self.cluster, self.set_name)
        except (KazooException, PgshovelError) as error:
            if str(error) != self._unread:  # once, not every second
                logger.warning("cannot read requests from zookeeper (%s); trying again", error)
            self._unread = str(error)
            return state
        self._unread = ""
        origins = {task.origin for task in state.tasks}
        for queued in found:
            name = queued.name
            if queued.request is not None:
                self._requests[name] = queued.request
            if name in origins or name in self._refused:
                continue
            try:
                if queued.request is None:
                    self.refuse(name, queued.problem)
                    continue
                if not queued.request.asks(self.copy):
                    continue  # asked of other copies (this one started after it was made)
                if self._answered(client, name, queued.request):
                    self._forget_if_answered(client, name, queued.request)
                    continue
                state = self._accept(client, name, queued.request, state)
            except (KazooException, TransientError) as error:
                logger.warning("request %s: %s; trying again later", name, error)
        return state

    def _answered(self, client: KazooClient, name: str, request: Request) -> bool:
        """Whether this copy answered request ``name`` (for a request of an older admin,
        naming no copies, whether anyone did)."""
        try:
            mine = requests.read_copy_result(client, self.cluster, self.set_name, name, self.copy)
            if requests.answered(mine):
                return True
            if request.copies:
                return False
            return requests.answered(
                requests.read_result(client, self.cluster, self.set_name, name)
            )
        except ConfigurationError:
            return False  # a result node holding no result: the worker's answer replaces it

    def _request(self, client: KazooClient, name: str) -> Request | None:
        """Request ``name`` as seen, or as ZooKeeper holds it now (None: gone or unreadable)."""
        if name not in self._requests:
            for queued in requests.pending(client, self.cluster, self.set_name):
                if queued.name == name and queued.request is not None:
                    self._requests[name] = queued.request
        return self._requests.get(name)

    def _answer(
        self, client: KazooClient, name: str, result: Result, request: Request | None
    ) -> None:
        """This copy's answer; also the request's own node for a request naming no copies
        (written by hand, or by an older admin, which reads that node)."""
        requests.write_copy_result(client, self.cluster, self.set_name, name, self.copy, result)
        if request is None or not request.copies:
            requests.write_result(client, self.cluster, self.set_name, name, result)

    def _forget_if_answered(self, client: KazooClient, name: str, request: Request | None) -> None:
        """Remove the request once every copy it asks has answered (its command may be gone);
        one that names no copies, or holds no request, at once."""
        if request is not None and request.copies:
            answers = requests.read_copy_results(client, self.cluster, self.set_name, name)
            if not all(requests.answered(answers.get(copy)) for copy in request.copies):
                return
        requests.remove_request(client, self.cluster, self.set_name, name)

    def refuse(self, name: str, reason: str) -> None:
        """Answer request ``name`` with ``failed`` and ``reason`` for this copy, and remove it
        once every copy it asks has answered (a node that holds no request: at once, its
        failure written for every copy). Where ZooKeeper does not let the worker (a node
        made with other credentials), the reason is logged once and the request left alone."""
        logger.error("request %s refused: %s", name, reason)
        self._refused.add(name)
        try:
            client = self.zookeeper()
            request = self._request(client, name)
            self._answer(client, name, Result("failed", reason), request)
            self._forget_if_answered(client, name, request)
        except (KazooException, PgshovelError) as error:
            logger.error("cannot answer request %s in zookeeper (%s): it is skipped", name, error)
            return
        self._refused.discard(name)

    def _accept(
        self, client: KazooClient, name: str, request: Request, state: WorkerState
    ) -> WorkerState:
        problem = self._problem(request, state)
        if problem:
            self.refuse(name, problem)
            return state
        wanted = set(request.tables) or {table.identity for table in state.tables}
        purpose: Purpose = "verify" if request.kind == "verify" else "resnapshot"
        tasks = [
            new_task(table, purpose, request.where, origin=name, repair=request.repair)
            for table in state.tables
            if table.identity in wanted
        ]
        state = state.replace(tasks=(*state.tasks, *tasks))
        self.target.store_state(state)
        self._answer(client, name, Result("running"), request)
        logger.info(
            "request %s: %s of %s",
            name,
            request.kind,
            ", ".join(".".join(t) for t in sorted(wanted)),
        )
        return state

    def _problem(self, request: Request, state: WorkerState) -> str:
        """Why ``request`` cannot be carried out ("" when it can)."""
        if not isinstance(self.target, ChunkTarget):
            return (
                f"target {type(self.target).__name__} cannot copy or compare tables chunk by "
                f"chunk (it offers no ChunkTarget capability): {request.kind} refused"
            )
        known = {table.identity: table for table in state.tables}
        unknown = [".".join(table) for table in request.tables if table not in known]
        if unknown:
            return f"table(s) {unknown!r} are not tables of set {self.set_name!r}"
        if not request.where:
            return ""
        if request.kind != "resnapshot":
            return "only 'set resnapshot' takes a --where filter"
        if not self.target.can_filter():
            return "this target takes no --where filter; re-snapshot whole tables"
        try:
            check_filter_text(request.where)
        except ConfigurationError as error:
            return str(error)
        tables = [known[identity] for identity in request.tables or sorted(known)]
        for table in tables:
            if not table.key:
                return (
                    f"--where on {table.qualified}: the table has no key, so the copy's rows "
                    "cannot be told apart by the source's; re-snapshot the whole table"
                )
        connection = connect(self.source_dsn, "pgshovel-replicate request", autocommit=True)
        try:
            for table in tables:
                # PostgreSQL parses and plans the filter; whoever wrote the request gets
                # no more than a read-only boolean expression of the captured columns.
                check_filter(connection, table, request.where)
        except ConfigurationError as error:
            return str(error)
        finally:
            connection.close()
        return ""

    def finished(self, task: SnapshotTask, state: WorkerState) -> list[SnapshotTask]:
        """Report a finished task of a request; the follow-up tasks a repair needs."""
        if not task.origin:
            return []
        follow = follow_ups(task, state.table(task.schema, task.table))
        report = TableReport(
            schema=task.schema,
            table=task.table,
            purpose=task.purpose,
            ranges=len(task.ranges),
            rows=task.rows,
            differences=tuple(
                (index, *task.ranges[index], source, copy, buckets)
                for index, source, copy, buckets in task.differences
            ),
        )
        remaining = [t for t in state.tasks if t.origin == task.origin and t.id != task.id]
        try:
            client = self.zookeeper()
            current = requests.read_copy_result(
                client, self.cluster, self.set_name, task.origin, self.copy
            )
            result = (current or Result("running")).with_table(report)
            request = self._request(client, task.origin)
            if not remaining and not follow:
                result = Result("done", result.message, result.tables)
                self._answer(client, task.origin, result, request)
                if request is not None:
                    self._forget_if_answered(client, task.origin, request)
                logger.info("request %s done", task.origin)
            else:
                self._answer(client, task.origin, result, request)
        except (KazooException, PgshovelError) as error:
            logger.warning("cannot report request %s to zookeeper: %s", task.origin, error)
        return follow


def follow_ups(task: SnapshotTask, table: TableShape | None) -> list[SnapshotTask]:
    """The tasks a finished task of a request leads to (pure).

    A verify with ``repair`` that found differing ranges: their repair (a copy of
    just those ranges). A repair: the verify of the ranges it copied, which
    reports and never repairs again. The verify starts only once the repair is
    done, so it compares the repaired copy.
    """
    if table is None or not task.origin:
        return []
    if task.purpose == "verify" and task.repair and task.differences:
        ranges = tuple(task.ranges[index] for index, *_ in task.differences)
        rows = sum(source for _, source, _, _ in task.differences)
        return [new_task(table, "repair", origin=task.origin).plan(ranges, rows)]
    if task.purpose == "repair":
        return [new_task(table, "verify", origin=task.origin).plan(task.ranges, task.rows)]
    return []
