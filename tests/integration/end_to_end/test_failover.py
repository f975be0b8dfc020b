"""Source failover: a set moved to a promoted physical standby, planned and unplanned.

Each test runs its own primary and a streaming standby of it (``servers``), a
set on the primary with a keyed table, a keyed insert-only ledger and an
unkeyed journal (a batch applied twice would show there as duplicate rows),
the real relay and worker, and writer threads (``_failover``). Planned: writes
go on throughout, as an application's would (a writer refused by a read-only
server retries on the other one); ``set failover --promote`` moves the relay
off the primary, fences it, promotes the standby and re-points the set — a
first attempt blocked by a transaction left open on the primary, with relay
and worker killed -9 and restarted while the set points at the standby, times
out and undoes itself; the second succeeds with no restart; no committed
transaction is lost. Unplanned: the standby stops receiving WAL while the
primary keeps committing, then the primary is killed -9 and the standby
promoted: with failover-safe publishing (``standbys:``) the relay never
published what the standby lacks and the copy equals the promoted primary;
without it the relay stops with an error naming the remedy, and the remedy,
run as printed to the end (``--accept-divergence``, relay restart, ``set verify
--repair``, resnapshot of the unkeyed table), leaves the copy equal to the
promoted primary, streaming on.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import psycopg2
import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import Server
from tests.integration.capture._capture import SET

from ._failover import (
    JOURNAL,
    Run,
    Writers,
    assert_same,
    disconnect,
    point_at_standby,
    read_only,
    rows,
)
from ._stack import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]


def test_planned_switchover_under_writes_moves_relay_and_worker_without_a_restart(
    servers: tuple[Server, Server],
    start_run: Callable[[list[str]], tuple[Run, str]],
    zookeeper: KazooClient,
) -> None:
    primary, standby = servers
    run, target = start_run([])
    writers = Writers(primary.dsn(), "app", threads=3, follow=(standby.dsn(),))
    try:
        run.wait_streaming()
        writers.wait_committed(150)
        # A transaction left open on the primary: the fence waits for it, times out, undoes.
        blocker = psycopg2.connect(primary.dsn(), connect_timeout=5)
        try:
            with blocker.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM accounts")
            # kill -9 of relay and worker once the set points at the standby, mid-attempt.
            attempt: list[str] = []
            command = threading.Thread(
                target=lambda: attempt.append(
                    run.failover(standby, "--promote", "--timeout", "8", succeeds=False)
                )
            )
            command.start()
            try:
                wait_until(lambda: "moved to database" in run.relay.output(), "the relay to move")
                run.kill_9_and_restart(2)
            finally:
                command.join(300)
            assert attempt, "the failing attempt raised (see above)"
            output = attempt[0]
            assert "begun before the fence" in output and str(blocker.info.backend_pid) in output
            assert read_only(primary) == "off" and standby.in_recovery()
            assert run.dsn(zookeeper) == primary.dsn(), "the set points at the old primary again"
            writers.wait_committed(100)  # on the primary again
        finally:
            blocker.close()
        output = run.failover(standby, "--promote")  # writes go on during the switchover
        assert "fail set" in output and not standby.in_recovery()
        assert read_only(primary) == "on"
        writers.wait_committed(150)  # on the new primary
    finally:
        writers.stop()
    assert writers.refused > 0, "the writers were moved by the fence"
    assert "is a standby in recovery" in run.relay.output(), "restarted while pointing there"
    old_journal = {(w, n) for w, n, _ in rows(primary.dsn(), JOURNAL)}
    new_journal = {(w, n) for w, n, _ in rows(standby.dsn(), JOURNAL)}
    assert writers.journal <= new_journal, "a committed transaction was lost"
    assert old_journal <= new_journal, "the old primary committed after the fence"
    run.caught_up(standby.dsn())
    assert run.relay.alive() and run.worker.alive(), "neither was restarted"
    assert_same(standby.dsn(), target)
    assert "moved to database" in run.relay.output()
    # Not asserted of the worker: the restarted one may take the move back and the move
    # forward in one restart that finds the DSN it started with (nothing to log); it streams
    # from Kafka either way, and the copy above equals the new primary.
    assert run.worker.stop() == 0 and run.relay.stop() == 0


@pytest.mark.parametrize("safe", [True, False], ids=["failover-safe", "asynchronous"])
def test_unplanned_failover_is_exact_with_safe_publishing_and_detected_without(
    safe: bool,
    servers: tuple[Server, Server],
    start_run: Callable[[list[str]], tuple[Run, str]],
    zookeeper: KazooClient,
) -> None:
    primary, standby = servers
    run, target = start_run([standby.name] if safe else [])
    writers = Writers(primary.dsn(), "before")
    try:
        run.wait_streaming()
        writers.wait_committed(100)
        disconnect(standby)
        writers.wait_committed(100)  # committed on the primary only
        published = run.offset() or 0
        if not safe:
            wait_until(lambda: (run.offset() or 0) > published, "batches the standby lacks")
        primary.kill()
    finally:
        writers.stop()
    if safe:
        # As if 'set failover --promote' had been killed -9 once it pointed the set there.
        point_at_standby(zookeeper, run.cluster, standby)
        output = run.failover(standby, succeeds=False)
        assert "an interrupted 'set failover --promote'" in output, output
    standby.promote()
    output = run.failover(standby)
    if safe:
        assert "finishing an interrupted failover" in output, output
    if not safe:
        follow_the_divergence_remedy(run, standby, target)
        return
    after = Writers(standby.dsn(), "after")
    try:
        after.wait_committed(100)
    finally:
        after.stop()
    run.caught_up(standby.dsn())
    assert_same(standby.dsn(), target)
    assert run.relay.alive() and run.worker.alive(), "neither was restarted"
    assert run.worker.stop() == 0 and run.relay.stop() == 0


def follow_the_divergence_remedy(run: Run, standby: Server, target: str) -> None:
    """The relay stops naming the remedy; each command it prints is run exactly as printed."""
    wait_until(lambda: not run.relay.alive(), "the relay to stop on the divergence", 120)
    log = run.relay.output()
    assert "which this database does not have" in log, log[-3000:]
    commands = re.findall(r"`(pgshovel-admin [^`]+)`", log.split("Remedy: ", 1)[1])
    assert [command.split()[3:5] for command in commands] == [
        ["set", "failover"],
        ["set", "verify"],
        ["set", "resnapshot"],
    ], commands
    accept, verify, resnapshot = commands
    assert "--accept-divergence" in accept
    assert verify.endswith(" public.accounts public.ledger --repair"), "the keyed tables"
    assert resnapshot.endswith(" public.journal"), "the one table without a key"
    assert "with a new node id" in run.run_printed(accept)
    run.restart_relay(2)
    after = Writers(standby.dsn(), "after")
    try:
        after.wait_committed(100)
    finally:
        after.stop()
    run.caught_up(standby.dsn())
    # The copy still holds what the old primary published and the new one never received.
    assert rows(target, JOURNAL) != rows(standby.dsn(), JOURNAL)
    report = run.run_printed(verify)
    # Both keyed tables differ (lost updates, lost inserts): both must be repaired.
    assert "public.accounts: repair" in report and "public.ledger: repair" in report, report
    run.run_printed(resnapshot)
    assert_same(standby.dsn(), target)
    streaming = Writers(standby.dsn(), "streaming")
    try:
        streaming.wait_committed(50)
    finally:
        streaming.stop()
    run.caught_up(standby.dsn())
    assert_same(standby.dsn(), target)
    assert "no difference" in run.admin("set", "verify", SET)  # exit 0: nothing differs
    assert run.worker.stop() == 0 and run.relay.stop() == 0
