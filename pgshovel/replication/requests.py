"""The worker's side of requests through ZooKeeper: re-snapshot and verify (with repair).

Between micro-batches the worker looks for new requests (at most once a
second), checks them (tables of the set, a ``--where`` condition the source
accepts and the target can evaluate), turns them into snapshot tasks stored in
its state (a restart resumes them), and reports: ``running`` when taken, one
table report per finished task, ``done`` when every task of the request is
finished, ``failed`` with the reason when it cannot be done, each under the
name of its copy (``copy_name`` of the target: another worker's copy of the
same set answers the same request on its own). A verify with repair that found
differing ranges copies just those ranges again and verifies them again before
it is done.
"""

from __future__ import annotations

import logging
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from psycopg2 import sql

from pgshovel.abc import Target
from pgshovel.cluster import requests
from pgshovel.cluster.requests import Request, Result, TableReport
from pgshovel.cluster.zookeeper import start_client
from pgshovel.errors import PgshovelError
from pgshovel.replication.incremental import new_task
from pgshovel.replication.targets import copy_name
from pgshovel.source import connect, translating
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
        self._repair: dict[str, bool] = {}

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
        """``state`` with the tasks of requests not taken yet (polled at most once a second)."""
        now = time.monotonic()
        if now < self._next_poll:
            return state
        self._next_poll = now + POLL_SECONDS
        try:
            client = self.zookeeper()
            found = requests.pending(client, self.cluster, self.set_name)
        except (KazooException, PgshovelError) as error:
            logger.warning("cannot read requests from zookeeper (%s); trying again later", error)
            return state
        origins = {task.origin for task in state.tasks}
        for name, request in found:
            if not request.asks(self.copy):
                continue  # asked of other copies (this one started after it was made)
            self._repair[name] = request.repair
            if name in origins:
                continue
            mine = requests.read_copy_result(client, self.cluster, self.set_name, name, self.copy)
            if requests.answered(mine):
                self._forget_if_answered(client, name, request)
                continue
            state = self._accept(client, name, request, state)
        return state

    def _answer(self, client: KazooClient, name: str, result: Result) -> None:
        requests.write_copy_result(client, self.cluster, self.set_name, name, self.copy, result)

    def _forget_if_answered(self, client: KazooClient, name: str, request: Request) -> None:
        """Remove the request once every copy it asks has answered (its command may be gone)."""
        if not request.copies:
            requests.remove_request(client, self.cluster, self.set_name, name)
            return
        answers = requests.read_copy_results(client, self.cluster, self.set_name, name)
        if all(requests.answered(answers.get(copy)) for copy in request.copies):
            requests.remove_request(client, self.cluster, self.set_name, name)

    def _accept(
        self, client: KazooClient, name: str, request: Request, state: WorkerState
    ) -> WorkerState:
        problem = self._problem(request, state)
        if problem:
            logger.error("request %s refused: %s", name, problem)
            self._answer(client, name, Result("failed", problem))
            self._forget_if_answered(client, name, request)
            return state
        wanted = set(request.tables) or {table.identity for table in state.tables}
        purpose: Purpose = "verify" if request.kind == "verify" else "resnapshot"
        tasks = [
            new_task(table, purpose, request.where, origin=name)
            for table in state.tables
            if table.identity in wanted
        ]
        state = state.replace(tasks=(*state.tasks, *tasks))
        self.target.store_state(state)
        self._answer(client, name, Result("running"))
        logger.info(
            "request %s: %s of %s",
            name,
            request.kind,
            ", ".join(".".join(t) for t in sorted(wanted)),
        )
        return state

    def _problem(self, request: Request, state: WorkerState) -> str:
        known = {table.identity for table in state.tables}
        unknown = [".".join(table) for table in request.tables if table not in known]
        if unknown:
            return f"table(s) {unknown!r} are not tables of set {self.set_name!r}"
        if request.where:
            if not self.target.can_filter():
                return "this target cannot evaluate --where conditions; re-snapshot whole tables"
            for schema, table in request.tables or sorted(known):
                error = self._check_where(schema, table, request.where)
                if error:
                    return f"--where {request.where!r} on {schema}.{table}: {error}"
        return ""

    def _check_where(self, schema: str, table: str, where: str) -> str:
        connection = connect(self.source_dsn, "pgshovel-replicate request", autocommit=True)
        try:
            with translating("checking a --where condition"), connection.cursor() as cursor:
                cursor.execute(
                    sql.SQL("EXPLAIN SELECT 1 FROM {} WHERE ({})").format(
                        sql.Identifier(schema, table), sql.SQL(where)
                    )
                )
        except PgshovelError as error:
            return str(error)
        finally:
            connection.close()
        return ""

    def finished(self, task: SnapshotTask, state: WorkerState) -> list[SnapshotTask]:
        """Report a finished task of a request; the follow-up tasks a repair needs."""
        if not task.origin:
            return []
        follow: list[SnapshotTask] = []
        if task.purpose == "verify" and task.differences and self._repair.get(task.origin):
            ranges = tuple(task.ranges[index] for index, *_ in task.differences)
            table = state.table(task.schema, task.table)
            if table is not None:
                # the share of the verified rows in those ranges (not the whole table's)
                estimate = round(task.rows * len(ranges) / max(1, len(task.ranges)))
                repair = new_task(table, "repair", origin=task.origin).plan(ranges, estimate)
                check = new_task(table, "verify", origin=task.origin).plan(ranges, estimate)
                follow = [repair, check]
                self._repair[task.origin] = False  # the second verify reports, no second repair
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
            if not remaining and not follow:
                result = Result("done", result.message, result.tables)
                self._answer(client, task.origin, result)
                request = dict(requests.pending(client, self.cluster, self.set_name)).get(
                    task.origin
                )
                if request is not None:
                    self._forget_if_answered(client, task.origin, request)
                logger.info("request %s done", task.origin)
            else:
                self._answer(client, task.origin, result)
        except (KazooException, PgshovelError) as error:
            logger.warning("cannot report request %s to zookeeper: %s", task.origin, error)
        return follow
