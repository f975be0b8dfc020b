"""A bank on the source and a balance auditor on the copy, for the staged apply's end-to-end test.

``accounts`` hold a fixed total; every transfer moves an amount between two
accounts whose keys fall in different partitions of the set topic (so its two
updates travel in different partitions and are staged by different Spark
tasks) and appends both legs to ``journal``, an unkeyed table (compared as a
multiset: a batch applied twice or lost shows); about 10% of transfers roll
back. ``items`` gets inserts, updates, key changes, deletes and now and then a
TRUNCATE with a refill in the same transaction. ``BalanceAuditor`` reads the
copy in repeatable-read snapshots and records every total it sees once the copy
streams: a micro-batch made visible in part would show another total.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

import psycopg2

from pgshovel.replication.targets import _pgstate
from pgshovel.source import connect
from pgshovel.stream.rows import partition_of
from tests.integration.capture._capture import SET

ACCOUNTS = 64
OPENING = 1000
TOTAL = ACCOUNTS * OPENING

DDL = (
    "CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL);"
    "CREATE TABLE journal (account integer, amount bigint, note text);"
    "CREATE TABLE items (id integer PRIMARY KEY, value integer, label text);"
    f"INSERT INTO accounts SELECT n, {OPENING} FROM generate_series(1, {ACCOUNTS}) n;"
    "INSERT INTO items SELECT n, n, 'item ' || n FROM generate_series(1, 200) n;"
)
ENTRIES = [{"schema": "public", "name": name} for name in ("accounts", "journal", "items")]


def create_bank(dsn: str) -> None:
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(DDL)
    finally:
        connection.close()


def _partition(account: int, partitions: int) -> int:
    return partition_of("public", "accounts", (str(account),), partitions)


class Bank:
    """Writer threads on the source: transfers and item changes (``counts`` says what ran)."""

    def __init__(self, dsn: str, partitions: int, threads: int = 2, seed: int = 7) -> None:
        self.dsn = dsn
        self.partitions = partitions
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._threads = [
            threading.Thread(target=self._run, args=(index, seed), name=f"bank-{index}")
            for index in range(threads)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def count(self, name: str) -> int:
        with self._lock:
            return self.counts[name]

    def wait(self, name: str, more: int, timeout: float = 180.0) -> None:
        goal = self.count(name) + more
        deadline = time.monotonic() + timeout
        while self.count(name) < goal:
            if self._errors:
                raise AssertionError(f"the bank failed: {self._errors[0]!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {more} more {name!r}")
            time.sleep(0.1)

    def stop(self) -> Counter[str]:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        if self._errors:
            raise AssertionError(f"the bank failed: {self._errors[0]!r}")
        return Counter(self.counts)

    def _add(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def _run(self, index: int, seed: int) -> None:
        rng = random.Random(seed * 100 + index)
        connection = connect(self.dsn, "pgshovel-tests bank")
        next_item = 1_000_000 * (index + 1)
        try:
            while not self._stop.is_set():
                try:
                    with connection.cursor() as cursor:
                        for _ in range(rng.randint(1, 4)):
                            self._transfer(cursor, rng)
                        next_item = self._items(cursor, rng, next_item, index)
                    if rng.random() < 0.1:
                        connection.rollback()
                        self._add("rolled back")
                    else:
                        connection.commit()
                        self._add("committed")
                except (
                    psycopg2.errors.DeadlockDetected,
                    psycopg2.errors.SerializationFailure,
                ):
                    connection.rollback()
                    self._add("deadlocks")
                time.sleep(0.002)
        except BaseException as error:
            self._errors.append(error)
        finally:
            connection.close()

    def _transfer(self, cursor: Any, rng: random.Random) -> None:
        source = rng.randint(1, ACCOUNTS)
        target = rng.randint(1, ACCOUNTS)
        while _partition(target, self.partitions) == _partition(source, self.partitions):
            target = rng.randint(1, ACCOUNTS)
        amount = rng.randint(1, 50)
        cursor.execute("UPDATE accounts SET balance = balance - %s WHERE id = %s", (amount, source))
        cursor.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s", (amount, target))
        cursor.execute(
            "INSERT INTO journal VALUES (%s, %s, 'out'), (%s, %s, 'in')",
            (source, -amount, target, amount),
        )

    def _items(self, cursor: Any, rng: random.Random, next_item: int, index: int) -> int:
        roll = rng.random()
        if roll < 0.3:
            cursor.execute("INSERT INTO items VALUES (%s, %s, 'new')", (next_item, index))
            return next_item + 1
        if roll < 0.55:
            cursor.execute(
                "UPDATE items SET value = value + 1, label = 'tab\there' WHERE id = "
                "(SELECT id FROM items ORDER BY random() LIMIT 1)"
            )
        elif roll < 0.75:
            cursor.execute(
                "UPDATE items SET id = %s WHERE id = (SELECT id FROM items ORDER BY random() "
                "LIMIT 1)",
                (next_item,),
            )
            self._add("key changes")
            return next_item + 1
        elif roll < 0.97:
            cursor.execute(
                "DELETE FROM items WHERE id = (SELECT id FROM items ORDER BY random() LIMIT 1)"
            )
        elif index == 0:
            cursor.execute("TRUNCATE items")
            cursor.execute(
                "INSERT INTO items SELECT n, n, 'refill' FROM generate_series(%s, %s) n",
                (next_item, next_item + 20),
            )
            self._add("truncates")
            return next_item + 21
        return next_item


class BalanceAuditor:
    """Reads the copy's total balance in repeatable-read snapshots while it streams."""

    def __init__(self, dsn: str, cluster: str) -> None:
        self.dsn = dsn
        self.cluster = cluster
        self.checks = 0
        self.violations: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="balance-auditor")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self._errors:
            raise AssertionError(f"the auditor failed: {self._errors[0]!r}")

    def _run(self) -> None:
        connection = connect(self.dsn, "pgshovel-tests auditor")
        connection.set_session(isolation_level="REPEATABLE READ")
        try:
            while not self._stop.is_set():
                self._check(connection)
                time.sleep(0.01)
        except BaseException as error:
            self._errors.append(error)
        finally:
            connection.close()

    def _check(self, connection: Any) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT to_regclass('pgshovel_replication.worker_state') IS NOT NULL"
                )
                row = cursor.fetchone()
                state = _pgstate.read(cursor, self.cluster, SET) if row and row[0] else None
                if state is None or state.phase != "streaming":
                    return
                cursor.execute("SELECT sum(balance)::bigint, count(*) FROM accounts")
                total, accounts = cursor.fetchone()
            self.checks += 1
            if total != TOTAL or accounts != ACCOUNTS:
                self.violations.append((total, accounts))
        finally:
            connection.rollback()


def table_rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    connection = connect(dsn, "pgshovel-tests")
    try:
        with connection.cursor() as cursor:
            cursor.execute(query)
            return list(cursor.fetchall())
    finally:
        connection.rollback()
        connection.close()
