"""``set resnapshot --where`` selects on the source only, and no request can poison the worker.

A set with a table whose column ``secret`` is not captured streams into a
PostgreSQL copy whose rows were changed by hand. Filters are evaluated on the
source alone: a plain one repairs exactly the rows it selects, a volatile one
(``random() < 0.5``) loses no row, one true only on the copy's database copies
nothing, one true only on the source's copies everything; copy keys the source
lacks are deleted whatever the filter. Then requests that cannot be carried
out are each refused with the reason in the request's result (``pgshovel-admin``
prints it and exits 1) while the worker streams on: an SQL injection (refused
by the admin before anything is written, and by the worker when written into
ZooKeeper directly; nothing is created in the source), a filter with a side
effect, a filter on the uncaptured column, a node that holds no JSON, a node
the worker may not read, a verify of a table whose copy lost a column. A
request written by an admin with ZooKeeper credentials is carried out, and at
the end the stream still reaches the copy.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl
from psycopg2.extensions import parse_dsn

from pgshovel.cluster import names, requests
from pgshovel.cluster.requests import Request
from pgshovel.sandbox import SandboxConnection

from ._requests import SET, RequestStack, make_stack, run_sql

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

SCHEMA = [
    "CREATE TABLE t_res (id integer PRIMARY KEY, v integer NOT NULL, secret text)",
    "INSERT INTO t_res SELECT g, g, 's' || g FROM generate_series(1, 400) g",
    "CREATE TABLE t_drop (id integer PRIMARY KEY, v integer)",
    "INSERT INTO t_drop SELECT g, g FROM generate_series(1, 50) g",
    "CREATE TABLE items (id integer PRIMARY KEY, v integer)",
    "INSERT INTO items SELECT g, g FROM generate_series(1, 50) g",
    "CREATE SEQUENCE counter",
]
TABLES: list[dict[str, Any]] = [
    {"name": "t_res", "columns": ["id", "v"]},
    {"name": "t_drop"},
    {"name": "items"},
]
INJECTION = "true); CREATE TABLE pwned (); SELECT (1"


def copy_values(stack: RequestStack) -> dict[int, int]:
    return {int(key): int(value) for key, value in stack.rows("t_res")[1]}


def source_values(stack: RequestStack) -> dict[int, int]:
    return {int(key): int(value) for key, value in stack.rows("t_res")[0]}


def refused(code: int, output: str, reason: str) -> None:
    assert code == 1, output
    assert reason in output, output


def ask_directly(zookeeper: KazooClient, stack: RequestStack, request: Request) -> str:
    """Write a request into ZooKeeper as anyone who may write there could; the worker's
    answer (a failed one must say why)."""
    name = requests.submit(zookeeper, stack.cluster, SET, request)
    result = requests.wait(zookeeper, stack.cluster, SET, name, timeout=180)
    assert result is not None, f"no answer to {name}"
    assert result.status == "failed", result
    return result.message


def answer_to_node(zookeeper: KazooClient, stack: RequestStack, name: str) -> str:
    result = requests.wait(zookeeper, stack.cluster, SET, name, timeout=180)
    assert result is not None and result.status == "failed", (name, result)
    return result.message


def test_filters_select_on_the_source_and_bad_requests_are_refused_while_streaming(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: list[Any],
) -> None:
    stack = make_stack(sandbox, make_database, cluster_name, tmp_path, processes, kafka_config)
    stack.start(zookeeper, SCHEMA, TABLES)
    stack.caught_up()
    stack.assert_equal("t_res", "t_drop", "items")
    source = source_values(stack)

    # A plain filter: the rows it selects in the source are copied, the others left alone,
    # and keys the source does not have are deleted.
    run_sql(
        stack.target,
        "UPDATE t_res SET v = -1",
        "DELETE FROM t_res WHERE id IN (2, 3)",
        "INSERT INTO t_res VALUES (10001, 7), (10002, 8)",
    )
    code, output = stack.admin("resnapshot", SET, "t_res", "--where", "id % 2 = 0")
    assert code == 0, output
    copy = copy_values(stack)
    assert set(copy) == set(source) - {3}
    assert all(copy[key] == source[key] for key in copy if key % 2 == 0)
    assert all(copy[key] == -1 for key in copy if key % 2 == 1)

    # Volatile: evaluated once per row, in the source; no row lost.
    code, output = stack.admin("resnapshot", SET, "t_res", "--where", "random() < 0.5")
    assert code == 0, output
    copy = copy_values(stack)
    assert set(copy) <= set(source) and len(copy) >= len(source) - 1
    assert all(copy[key] in (source[key], -1) for key in copy)
    assert 0 < sum(1 for key in copy if key % 2 == 1 and copy[key] == source[key]) < 200

    # True only on the copy's database: selects nothing in the source, changes nothing.
    before = stack.rows("t_res")[1]
    copy_only = f"current_database() = '{parse_dsn(stack.target)['dbname']}'"
    code, output = stack.admin("resnapshot", SET, "t_res", "--where", copy_only)
    assert code == 0, output
    assert stack.rows("t_res")[1] == before
    # True only on the source's: selects every row there.
    source_only = f"current_database() = '{parse_dsn(stack.source)['dbname']}'"
    code, output = stack.admin("resnapshot", SET, "t_res", "--where", source_only)
    assert code == 0, output
    stack.assert_equal("t_res")

    # SQL injection: the admin refuses before writing anything; the worker refuses it too.
    results = names.results_path(stack.cluster, SET)
    answered = len(zookeeper.get_children(results))
    code, output = stack.admin("resnapshot", SET, "t_res", "--where", INJECTION)
    refused(code, output, "')' closes a parenthesis the filter did not open")
    assert len(zookeeper.get_children(results)) == answered, "nothing was written"
    message = ask_directly(
        zookeeper, stack, Request("resnapshot", (("public", "t_res"),), INJECTION)
    )
    assert "')' closes a parenthesis the filter did not open" in message
    message = ask_directly(
        zookeeper,
        stack,
        Request("resnapshot", (), "true; CREATE TABLE pwned2 (); COPY t_res TO '/tmp/x'"),
    )
    assert "';' ends a statement" in message
    # A function with a side effect passes the checks (it is an expression) and fails its
    # read-only read: the request is refused, the sequence never moved.
    code, output = stack.admin("resnapshot", SET, "t_res", "--where", "nextval('counter') > 0")
    refused(code, output, "tried to write")
    assert "status: failed" in output
    run_sql(
        stack.source,
        "DO $$ BEGIN IF to_regclass('pwned') IS NOT NULL OR to_regclass('pwned2') IS NOT NULL "
        "OR (SELECT is_called FROM counter) THEN RAISE 'the source was written'; END IF; END $$",
    )

    # The uncaptured column: not there for a filter, whoever asks.
    code, output = stack.admin("resnapshot", SET, "t_res", "--where", "secret = 's1'")
    refused(code, output, 'column "secret" does not exist')
    message = ask_directly(
        zookeeper, stack, Request("resnapshot", (("public", "t_res"),), "secret = 's1'")
    )
    assert 'column "secret" does not exist' in message and "captures: id, v" in message

    # A node that holds no request, and one the worker may not read.
    path = zookeeper.create(
        f"{names.requests_path(stack.cluster, SET)}/request-", b"not json", sequence=True
    )
    assert "holds no JSON" in answer_to_node(zookeeper, stack, str(path).rsplit("/", 1)[1])
    password = uuid.uuid4().hex
    stranger = KazooClient(
        hosts=sandbox.zookeeper_hosts, auth_data=[("digest", f"someone:{password}")]
    )
    stranger.start(timeout=15.0)
    try:
        path = stranger.create(
            f"{names.requests_path(stack.cluster, SET)}/request-",
            Request("verify").encode(),
            acl=[make_digest_acl("someone", password, all=True)],
            sequence=True,
        )
    finally:
        stranger.stop()
        stranger.close()
    assert "zookeeper refused access" in answer_to_node(
        zookeeper, stack, str(path).rsplit("/", 1)[1]
    )

    # An admin with ZooKeeper credentials: its request takes the set's ACL, the worker reads it.
    as_someone = stack.environment(PGSHOVEL_ZOOKEEPER_AUTH=f"digest:someone:{password}")
    code, output = stack.admin("verify", SET, "items", "--timeout", "180", environment=as_someone)
    assert code == 0, output

    # A verify the copy cannot answer (it lost a column): refused, the worker goes on.
    run_sql(stack.target, "ALTER TABLE t_drop DROP COLUMN v")
    code, output = stack.admin("verify", SET, "t_drop")
    refused(code, output, "column t.v does not exist")
    assert re.search(r"verify of public\.t_drop failed", output), output

    # Later requests work, and the stream still reaches the copy.
    run_sql(
        stack.source,
        "UPDATE items SET v = v + 1000 WHERE id <= 10",
        "UPDATE t_res SET v = 0 WHERE id = 1",
    )
    stack.caught_up()
    stack.assert_equal("items", "t_res")
    code, output = stack.admin("verify", SET, "items", "t_res")
    assert code == 0, output
    assert stack.worker.alive()
    assert "Traceback" not in stack.worker.output()
