"""Security end to end: ZooKeeper nodes need the credentials, no node holds a password, and the
relay and the worker replicate exactly as roles holding only what `set grants` prints.

Every process gets ZooKeeper credentials through its environment, the set's DSN
names the database without a password, and relay and worker log in as their own
roles through ``source_connection``. After the run, every node under the cluster
is walked: readable with the credentials, ``NoAuth`` without them or with a
wrong password, creator-only, and free of every password of the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import yaml
from kazoo.client import KazooClient
from psycopg2 import sql
from psycopg2.extensions import make_dsn, parse_dsn

from pgshovel.cluster import names, security
from pgshovel.cluster.zookeeper import start_client
from pgshovel.replication.metrics import WorkerMetrics
from pgshovel.replication.status import StatusBoard
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import failed, ok, rows, write_set
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import (
    RelayProcess,
    queue_drained,
    read_topic,
    topic_of,
    validated,
    wait_for,
    write_relay_yml,
)

from ._scenario import Processes
from ._schema import BULK, MATRIX, ODD, PAIRS, assert_same_rows, create_source, create_types
from ._security import (
    WITHOUT_CREDENTIALS,
    Credentials,
    Role,
    Roles,
    check_protected,
    run_admin,
    run_sql,
)
from ._stack import WorkerProcess, wait_caught_up, wait_until, worker_state, write_replication_yml
from ._workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEDGER = sql.Identifier("Sec Schema", "Ledger")


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> Credentials:
    """ZooKeeper credentials in this process's environment (children inherit them)."""
    found = Credentials()
    monkeypatch.setenv(security.AUTH_VARIABLE, found.auth)
    monkeypatch.delenv(security.AUTH_FILE_VARIABLE, raising=False)
    monkeypatch.delenv(security.ACL_VARIABLE, raising=False)
    return found


@pytest.fixture
def nobody_by_default(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Processes log in as a role that does not exist unless told otherwise.

    The set's DSN names only the database, as the README advises; the admin logs
    in with ``PGUSER=postgres`` (the returned environment), relay and worker only
    through their ``source_connection``: without it they could not connect.
    """
    monkeypatch.setenv("PGUSER", "pgshovel_nobody")
    return {"PGUSER": "postgres"}


def database_only(dsn: str) -> str:
    """``dsn`` without its user: which database, not who logs in."""
    return make_dsn(**{key: value for key, value in parse_dsn(dsn).items() if key != "user"})


@pytest.fixture
def secured_cluster(
    sandbox: SandboxConnection, cluster_name: str, credentials: Credentials
) -> Iterator[str]:
    """A cluster name whose nodes are deleted with the credentials after the test."""
    yield cluster_name
    client = credentials.client(sandbox.zookeeper_hosts)
    try:
        client.delete(names.cluster_path(cluster_name), recursive=True)
    finally:
        client.stop()
        client.close()


@pytest.fixture
def roles(sandbox: SandboxConnection, tmp_path: Path) -> Iterator[Roles]:
    created = Roles(sandbox, tmp_path)
    yield created
    created.drop()


def grant(
    sandbox: SandboxConnection,
    cluster: str,
    source: str,
    relay: Role,
    worker: Role,
    as_admin: dict[str, str],
) -> str:
    """Run what `pgshovel-admin set grants` prints in the source; return the printed text."""
    printed = ok(
        run_admin(
            sandbox,
            cluster,
            *("set", "grants", SET, "--relay-role", relay.name, "--worker-role", worker.name),
            environment=as_admin,
        )
    )
    run_sql(source, [line for line in printed.splitlines() if line.strip()])
    return printed


def start_relay(
    sandbox: SandboxConnection, cluster: str, directory: Path, role: Role, processes: Processes
) -> RelayProcess:
    config = write_relay_yml(directory, sandbox, source_connection=role.source_connection())
    relay = RelayProcess(sandbox, cluster, config, directory / "relay.log")
    processes.append(relay)
    wait_until(
        lambda: "leading" in relay.output(), "the relay to lead", 60, relay.alive, relay.output
    )
    return relay


def backends(dsn: str, role: Role) -> set[str]:
    """The application names of ``role``'s sessions on the source database."""
    connection = psycopg2.connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT application_name FROM pg_stat_activity WHERE usename = %s AND datname = %s",
                (role.name, parse_dsn(dsn)["dbname"]),
            )
            return {row[0] for row in cursor.fetchall()}
    finally:
        connection.close()


def test_zookeeper_nodes_need_the_credentials_and_hold_no_password(
    sandbox: SandboxConnection,
    database: str,
    secured_cluster: str,
    credentials: Credentials,
    roles: Roles,
    tmp_path: Path,
    processes: Processes,
    nobody_by_default: dict[str, str],
) -> None:
    cluster, source = secured_cluster, database
    run_sql(
        source,
        [
            "CREATE TABLE accounts (id int PRIMARY KEY, owner text)",
            'CREATE SCHEMA "Sec Schema"',
            sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, amount numeric)").format(LEDGER),
        ],
    )
    admin_password = "source-" + credentials.password  # the admin's PGPASSWORD: never stored
    as_admin = {**nobody_by_default, "PGPASSWORD": admin_password}
    tables = [{"name": "accounts"}, {"schema": "Sec Schema", "name": "Ledger"}]
    set_file = write_set(tmp_path, database_only(source), tables)
    ok(run_admin(sandbox, cluster, "cluster", "initialize", environment=as_admin))
    ok(run_admin(sandbox, cluster, "set", "create", SET, set_file, environment=as_admin))
    relay_role, worker_role = roles.create("relay"), roles.create("worker")
    roles.databases.append(source)
    grant(sandbox, cluster, source, relay_role, worker_role, as_admin)

    # Without credentials, or with a wrong password: one line naming the node and the variable.
    for environment in (
        WITHOUT_CREDENTIALS,
        {security.AUTH_VARIABLE: "digest:pgshovel-test:wrong"},
    ):
        reason = failed(run_admin(sandbox, cluster, "set", "list", environment=environment))
        assert f"zookeeper refused access to '/{cluster}/sets'" in reason, reason
        assert security.AUTH_VARIABLE in reason and credentials.password not in reason

    # The relay's role reads no table and cannot write schema events into a queue.
    as_relay = make_dsn(source, user=relay_role.name)
    schema = sql.Identifier(names.schema_name(cluster))
    for statement in (
        sql.SQL("SELECT count(*) FROM accounts"),
        sql.SQL(
            "SELECT {}.announce('accounts'::regclass, 'announce', 'forged', false, false, {})"
        ).format(schema, sql.Literal(names.queue_name(cluster, SET))),
    ):
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            run_sql(as_relay, [statement])

    # The worker's role writes watermarks, and nothing else, into the cluster's queues.
    as_worker = make_dsn(source, user=worker_role.name)
    queue = sql.Literal(names.queue_name(cluster, SET))
    run_sql(
        as_worker,
        [
            sql.SQL("SELECT {}.insert_watermark({}, 'probe', 'public', 'accounts')").format(
                schema, queue
            )
        ],
    )
    with pytest.raises(psycopg2.errors.InsufficientPrivilege):
        run_sql(
            as_worker,
            [
                sql.SQL(
                    "SELECT pgq.insert_event({}, 'I', '[null,{{}}]', 'public', 'accounts', '', '')"
                ).format(queue)
            ],
        )
    with pytest.raises(psycopg2.errors.RaiseException):
        run_sql(
            as_worker,
            [
                sql.SQL(
                    "SELECT {}.insert_watermark('elsewhere', 'x', 'public', 'accounts')"
                ).format(schema)
            ],
        )

    relay = start_relay(sandbox, cluster, tmp_path, relay_role, processes)
    assert {name.split(" ")[0] for name in backends(source, relay_role)} == {"pgshovel-relay"}, (
        "the relay logs in as its role"
    )
    run_sql(
        source,
        [
            "INSERT INTO accounts SELECT i, 'owner ' || i FROM generate_series(1, 50) AS i",
            sql.SQL("INSERT INTO {} SELECT i, i * 1.5 FROM generate_series(1, 30) AS i").format(
                LEDGER
            ),
            "UPDATE accounts SET owner = 'changed' WHERE id <= 10",
        ],
    )
    wait_for(
        lambda: queue_drained(source, cluster), 60, "the relay to drain the queue", relay.output
    )
    mutations = [
        mutation
        for batch in validated(read_topic(sandbox.kafka_config(), topic_of(cluster)))
        for mutation in batch.mutations
    ]
    assert len(mutations) == 90
    assert {(m.schema, m.table) for m in mutations} == {
        ("public", "accounts"),
        ("Sec Schema", "Ledger"),
    }

    # A relay without the credentials cannot even read the set: it says why and exits 1.
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(security.AUTH_VARIABLE)
        stranger = RelayProcess(sandbox, cluster, tmp_path / "relay.yml", tmp_path / "stranger.log")
    processes.append(stranger)
    wait_for(lambda: not stranger.running(), 60, "the relay without credentials to exit")
    assert stranger.returncode == 1, stranger.output()
    assert f"error: zookeeper refused access to '{names.set_path(cluster, SET)}'" in (
        stranger.output()
    )

    # A worker's status node (written as a worker writes it, with the cluster's credentials)
    # and a request that copy never answers leave status, request and result nodes to check.
    status_client = start_client(sandbox.zookeeper_hosts)
    board = StatusBoard(
        lambda: status_client, cluster, SET, "PostgresTarget", copy="postgresql:absent/copy"
    )
    try:
        board.publish(WorkerMetrics(), force=True)
        run_admin(sandbox, cluster, "set", "verify", SET, "--timeout", "1", environment=as_admin)
        checked = check_protected(
            sandbox.zookeeper_hosts,
            credentials,
            names.cluster_path(cluster),
            [credentials.password, admin_password, relay_role.password, worker_role.password],
        )
    finally:
        board.close()
        status_client.stop()
        status_client.close()
    set_path = names.set_path(cluster, SET)
    assert {
        names.cluster_path(cluster),
        names.sets_path(cluster),
        set_path,
        names.relay_path(cluster, SET),
        names.requests_path(cluster, SET),
        names.results_path(cluster, SET),
        names.workers_path(cluster, SET),
    } <= set(checked)
    lock_nodes = [path for path in checked if path.startswith(names.relay_path(cluster, SET) + "/")]
    assert lock_nodes, "the running relay's election node is checked"
    assert any(path.startswith(names.results_path(cluster, SET) + "/") for path in checked)

    assert relay.stop() == 0, relay.output()[-3000:]
    for secret in (credentials.password, relay_role.password, admin_password):
        assert secret not in relay.output()


def test_least_privilege_roles_replicate_row_for_row(
    sandbox: SandboxConnection,
    make_database: Any,
    secured_cluster: str,
    credentials: Credentials,
    roles: Roles,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
    nobody_by_default: dict[str, str],
) -> None:
    cluster, as_admin = secured_cluster, nobody_by_default
    source, target = make_database("source"), make_database("target")
    tables = (ODD, PAIRS, MATRIX, BULK)
    create_source(source, rows=300, bulk_rows=3000, seed=7)
    ok(run_admin(sandbox, cluster, "cluster", "initialize", environment=as_admin))
    entries = [table.set_entry() for table in tables]
    set_file = write_set(tmp_path, database_only(source), entries)
    ok(run_admin(sandbox, cluster, "set", "create", SET, set_file, environment=as_admin))
    relay_role, worker_role = roles.create("relay"), roles.create("worker")
    roles.databases += [source, target]
    grant(sandbox, cluster, source, relay_role, worker_role, as_admin)
    # The worker's copy: a database it owns (it creates schemas, tables and its state there).
    create_types(target)
    run_sql(
        target,
        [
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(parse_dsn(target)["dbname"]), sql.Identifier(worker_role.name)
            )
        ],
    )
    relay = start_relay(sandbox, cluster, tmp_path, relay_role, processes)
    configuration = write_replication_yml(
        tmp_path / "replication.yml",
        kafka_config,
        topic_of(cluster),
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": make_dsn(target, user=worker_role.name)},
        },
        ranges_per_table=2,
    )
    document = yaml.safe_load(configuration.read_text())
    document["source_connection"] = worker_role.source_connection()
    configuration.write_text(yaml.safe_dump(document, allow_unicode=True))

    def stored_offset() -> int | None:
        return (worker_state(target, cluster) or ("", None))[1]

    workload = Workload(source, threads=2, seed=7)
    workload.start()
    try:
        workload.wait_committed(20)
        worker = WorkerProcess(sandbox, cluster, configuration, tmp_path / "worker.log")
        processes.append(worker)
        wait_until(
            lambda: stored_offset() is not None, "streaming", alive=worker.alive, log=worker.output
        )
        workload.wait_committed(60)
    finally:
        counts = workload.stop()
    wait_caught_up(
        source, cluster, kafka_config, topic_of(cluster), stored_offset, worker.alive, worker.output
    )
    for table in tables:
        assert_same_rows(source, target, table)
    assert counts["committed"] >= 80 and counts["deletes"] > 0, dict(counts)

    # Verify: watermarks written and checksums read by the worker's role.
    report = ok(run_admin(sandbox, cluster, "set", "verify", SET, "--timeout", "240"))
    assert report.count("no difference") == len(tables), report
    owners = rows(
        target, "SELECT DISTINCT tableowner FROM pg_tables WHERE tablename = 'worker_state'"
    )
    assert owners == [(worker_role.name,)], "the worker logs in to its copy as its role"

    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    secrets = [credentials.password, relay_role.password, worker_role.password]
    check_protected(sandbox.zookeeper_hosts, credentials, names.cluster_path(cluster), secrets)
    for process in (relay, worker):
        assert not any(secret in process.output() for secret in secrets)


def test_cluster_secure_closes_a_cluster_created_without_credentials(
    sandbox: SandboxConnection,
    database: str,
    secured_cluster: str,
    credentials: Credentials,
    zookeeper: KazooClient,
    tmp_path: Path,
) -> None:
    cluster = secured_cluster
    run_sql(database, ["CREATE TABLE accounts (id int PRIMARY KEY, owner text)"])
    set_file = write_set(tmp_path, database, [{"name": "accounts"}])
    open_ = WITHOUT_CREDENTIALS
    ok(run_admin(sandbox, cluster, "cluster", "initialize", environment=open_))
    ok(run_admin(sandbox, cluster, "set", "create", SET, set_file, environment=open_))
    set_path = names.set_path(cluster, SET)
    assert zookeeper.get(set_path)[0], "created open: anybody reads it"

    reason = failed(run_admin(sandbox, cluster, "cluster", "secure", environment=open_))
    assert "no ACL to apply" in reason and security.AUTH_VARIABLE in reason
    planned = ok(run_admin(sandbox, cluster, "cluster", "secure", "--dry-run"))
    assert planned.splitlines()[-1] == "dry run: would set ACL auth::cdrwa on 3 node(s)"
    assert planned.splitlines()[:3] == [set_path, names.sets_path(cluster), f"/{cluster}"]
    assert zookeeper.get(set_path)[0], "a dry run changes nothing"

    assert ok(run_admin(sandbox, cluster, "cluster", "secure")).endswith(
        "done: ACL auth::cdrwa on 3 node(s)\n"
    )
    assert len(check_protected(sandbox.zookeeper_hosts, credentials, f"/{cluster}", [])) == 3
    assert "zookeeper refused access" in failed(
        run_admin(sandbox, cluster, "set", "list", environment=open_)
    )
    assert ok(run_admin(sandbox, cluster, "set", "list")).startswith(f"{SET}\t")
