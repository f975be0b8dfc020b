"""Lost database connections under a workload: relay and worker ride them out, nothing is lost.

Twice each, while threads keep writing: the relay's source backends are
terminated, the worker's target backends are terminated, and PostgreSQL (source
and target alike) is restarted. These are transient faults: with the default
``on_error: exit`` neither process exits or needs a hand, the relay's epoch does
not move (no leadership change happened), and the copy converges row for row.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.sandbox import SandboxConnection, restart_postgres
from tests.integration.capture._capture import SET
from tests.integration.relay._relay import terminate

from ._scenario import Processes, Scenario, captured_source
from ._stack import wait_until, worker_state
from ._targets import make_target, source_rows
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

SCHEMA = """
CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL, note text);
INSERT INTO accounts SELECT g, 0, 'n' || g FROM generate_series(1, 500) g;
"""


class ResilientWriter(WriterThreads):
    """Threads that write through every fault: a lost connection is reopened, never fatal."""

    reconnect = True
    pause = 0.01

    def write(self, cursor: Any, rng: random.Random) -> None:
        key = rng.randrange(1, 800)
        if rng.random() < 0.7:
            cursor.execute(
                "INSERT INTO accounts VALUES (%s, %s, 'w') ON CONFLICT (id) "
                "DO UPDATE SET balance = accounts.balance + EXCLUDED.balance",
                (key, rng.randrange(1, 100)),
            )
        else:
            cursor.execute("DELETE FROM accounts WHERE id = %s", (key,))


def relay_epoch(zookeeper: KazooClient, cluster: str) -> int:
    _data, stat = zookeeper.get(names.relay_path(cluster, SET))
    return int(stat.version)


def test_relay_and_worker_ride_out_lost_connections_and_restarts(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: Processes,
) -> None:
    source = captured_source(make_database, zookeeper, cluster_name, SCHEMA, ["accounts"])
    run = Scenario(sandbox, cluster_name, source, tmp_path, processes, kafka_config)
    copy = make_target("postgresql", make_database, tmp_path, cluster_name)
    target = copy.dsn
    configuration = run.replication_yml(copy.spec)
    relay, worker = run.start_relay(lead=False), run.start_worker(configuration)

    def stored_offset() -> int | None:
        try:
            state = worker_state(target, cluster_name)
        except Exception:  # the server is restarting: no answer yet
            return None
        return None if state is None else state[1]

    wait_until(
        lambda: stored_offset() is not None,
        "the worker to stream",
        180,
        worker.alive,
        worker.output,
    )
    epoch = relay_epoch(zookeeper, cluster_name)
    writer = ResilientWriter(source)
    writer.start()
    faults: list[str] = []
    try:
        for round_number in range(2):
            time.sleep(2.0)
            killed = terminate(sandbox.postgres_dsn, "pgshovel-relay")
            faults.append(f"relay backends {killed}")
            time.sleep(2.0)
            killed = terminate(sandbox.postgres_dsn, "pgshovel-replicate target")
            faults.append(f"worker target backends {killed}")
            time.sleep(2.0)
            restart_postgres(sandbox)
            faults.append(f"postgresql restart {round_number + 1}")
            assert relay.alive(), relay.output()[-3000:]
            assert worker.alive(), worker.output()[-3000:]
        time.sleep(3.0)
    finally:
        writer.stop()
    assert writer.committed > 200, f"the writers kept writing ({writer.committed})"
    assert "relay backends 0" not in faults, faults
    assert "worker target backends 0" not in faults, faults
    run.wait_caught_up(worker, stored_offset, timeout=240)
    assert relay.alive() and worker.alive(), "no process needed a hand"
    assert relay_epoch(zookeeper, cluster_name) == epoch, "no leadership change, no new epoch"
    assert source_rows(target, "accounts") == source_rows(source, "accounts")
    assert worker.stop() == 0, worker.output()[-3000:]
    assert relay.stop() == 0, relay.output()[-3000:]
    relay_log = relay.output()
    assert relay_log.count("leading ") == 1, "the relay led once, throughout"
