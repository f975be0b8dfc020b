"""`set failover` moves a set only to a physical copy of its database, into one writable history.

Refused, with the reason and nothing changed: ``--promote --to`` the primary
itself under another spelling (there is no standby to promote), and ``--to`` a
``CREATE DATABASE ... TEMPLATE`` clone of the set's database (same node id,
same triggers, but another database: the set's would go on taking writes
nobody captures). With failover-safe publishing and the standby cut off, a
promoted standby beside a primary that still takes writes is refused too; the
remedy the refusal names (fence the old primary) is run, and the failover then
interrupts the batch the relay holds back for the standby: the relay moves
without a restart and the copy equals the new primary.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient
from psycopg2 import sql
from psycopg2.extensions import make_dsn, parse_dsn

from pgshovel.cluster.sets import read_set
from pgshovel.sandbox import SandboxConnection, Server
from tests.integration.capture._capture import SET, install

from ._failover import TABLES, Run, Writers, admin, assert_same, disconnect, execute, rows
from ._stack import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]


def _triggers(dsn: str) -> list[tuple[str, ...]]:
    return rows(
        dsn,
        "SELECT tgrelid::regclass::text, tgname, tgargs::text FROM pg_trigger "
        "WHERE tgname LIKE 'pgshovel%' ORDER BY 1, 2",
    )


def test_the_primary_itself_and_a_template_clone_are_refused(
    sandbox: SandboxConnection,
    servers: tuple[Server, Server],
    zookeeper: KazooClient,
    cluster_name: str,
) -> None:
    primary, standby = servers
    install(
        zookeeper,
        cluster_name,
        primary.dsn(),
        [{"schema": "public", "name": table} for table in TABLES],
        allow_unkeyed=True,
    )
    before = (read_set(zookeeper, cluster_name, SET), _triggers(primary.dsn()))
    # The primary spelled as a URI: the same server, the same database.
    parts = parse_dsn(primary.dsn())
    spelled = f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"
    output = admin(
        sandbox,
        cluster_name,
        "set",
        "failover",
        SET,
        "--to",
        spelled,
        "--promote",
        succeeds=False,
    )
    assert "already uses" in output and "nothing to promote" in output, output
    output = admin(sandbox, cluster_name, "set", "failover", SET, "--to", spelled, succeeds=False)
    assert "already uses" in output, output
    # A clone of the set's database on the same server: node id and triggers come along.
    execute(
        primary.dsn("postgres"),
        sql.SQL("CREATE DATABASE clone TEMPLATE {}").format(sql.Identifier(parts["dbname"])),
    )
    clone = make_dsn(primary.dsn(), dbname="clone")
    for extra in (["--promote"], []):
        output = admin(
            sandbox, cluster_name, "set", "failover", SET, "--to", clone, *extra, succeeds=False
        )
        assert "is database 'clone' on the server of set" in output, output
        assert "not a physical standby" in output, output
    # The standby in recovery is what --promote is for; without it: the reason.
    output = admin(
        sandbox, cluster_name, "set", "failover", SET, "--to", standby.dsn(), succeeds=False
    )
    assert "is a standby in recovery: pass --promote" in output, output
    assert (read_set(zookeeper, cluster_name, SET), _triggers(primary.dsn())) == before
    assert standby.in_recovery()


def test_a_move_interrupts_a_batch_held_back_for_a_cut_off_standby(
    servers: tuple[Server, Server],
    start_run: Callable[[list[str]], tuple[Run, str]],
    zookeeper: KazooClient,
) -> None:
    primary, standby = servers
    run, target = start_run([standby.name])
    writers = Writers(primary.dsn(), "app", follow=(standby.dsn(),))
    try:
        run.wait_streaming()
        writers.wait_committed(50)
        disconnect(standby)  # failover-safe publishing now holds every batch back
        wait_until(
            lambda: "batch held back" in run.relay.output(), "the relay to hold a batch back"
        )
        standby.promote()
        output = run.failover(standby, succeeds=False)
        assert "two writable histories" in output, output
        assert run.dsn(zookeeper) == primary.dsn()
        # The remedy as printed: fence the old primary (its writers move to the new one).
        fence = re.search(
            r"as a superuser: (ALTER SYSTEM [^;]+; SELECT pg_reload_conf\(\))", output
        )
        assert fence is not None, output
        execute(primary.dsn(), *fence.group(1).split("; "))
        output = run.failover(standby)
        assert "fail set" in output, output
        writers.wait_committed(50)  # on the new primary
    finally:
        writers.stop()
    assert writers.refused > 0, "the fence moved the writers"
    run.caught_up(standby.dsn())
    log = run.relay.output()
    assert "moved to database" in log, log[-3000:]
    assert run.relay.alive() and run.worker.alive(), "neither was restarted"
    # What the old primary committed after the cut was never published: the copy is exact.
    assert_same(standby.dsn(), target)
    assert run.worker.stop() == 0 and run.relay.stop() == 0
