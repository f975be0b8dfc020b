"""A randomized concurrent workload on the end-to-end source, run by threads until stopped.

Each thread runs multi-statement transactions over the odd-named, composite-key
and type-matrix tables: inserts, updates, deletes and primary-key changes;
about 15% are rolled back, some roll back to a savepoint part way, and thread 0
now and then truncates the composite-key table (and refills a few rows in the
same transaction). New keys are unique per thread, so conflicts come only from
row locks; a deadlock or serialization failure just rolls the transaction back.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg2
import psycopg2.errors
from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.source import connect

from ._schema import (
    MATRIX,
    MATRIX_COLUMNS,
    ODD,
    PAIRS,
    REGIONS,
    Table,
    matrix_row,
    matrix_value,
    odd_row,
    pairs_row,
)

#: keys below this were loaded before the test; threads take keys above it
KEY_SPACE = 10_000_000


def _pick(table: Table, rng: random.Random, high: int) -> sql.Composable:
    """A predicate matching (at most) one existing row of ``table``, chosen at random."""
    keys = sql.SQL(", ").join(sql.Identifier(column) for column in table.key)
    start = rng.randrange(high)
    if len(table.key) == 1:
        return sql.SQL("({}) = (SELECT {} FROM {} WHERE {} >= {} ORDER BY 1 LIMIT 1)").format(
            keys, keys, table.identifier, keys, sql.Literal(start)
        )
    return sql.SQL(
        "({}) = (SELECT {} FROM {} WHERE region = {} AND n >= {} ORDER BY n LIMIT 1)"
    ).format(keys, keys, table.identifier, sql.Literal(rng.choice(REGIONS)), sql.Literal(start))


class Workload:
    """``threads`` writers on the source ``dsn``; ``start()``, then ``stop()`` returns counts.

    Counts: transactions ``committed`` and ``aborted``, ``truncates committed``,
    ``deadlocks`` (rolled back), ``savepoint rollbacks``, and rows touched by
    ``inserts``, ``updates``, ``key changes`` and ``deletes`` (rolled-back ones too).
    """

    def __init__(
        self, dsn: str, threads: int, seed: int, pause: float = 0.004, arrow_safe: bool = False
    ) -> None:
        self.dsn = dsn
        self.arrow_safe = arrow_safe
        self.pause = pause
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._threads = [
            threading.Thread(target=self._run, args=(index, seed), name=f"workload-{index}")
            for index in range(threads)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def committed(self) -> int:
        return self.count("committed")

    def count(self, name: str) -> int:
        with self._lock:
            return self.counts[name]

    def wait_committed(self, more: int, timeout: float = 120.0) -> None:
        """Block until ``more`` further transactions have committed."""
        self.wait_count("committed", more, timeout)

    def wait_count(self, name: str, more: int, timeout: float = 120.0) -> None:
        """Block until the ``name`` count (see ``counts``) has grown by ``more``."""
        goal = self.count(name) + more
        deadline = time.monotonic() + timeout
        while self.count(name) < goal:
            if self._errors or time.monotonic() > deadline:
                raise AssertionError(
                    f"the workload did not reach {goal} {name} "
                    f"(counts {dict(self.counts)!r}, errors {self._errors!r})"
                )
            time.sleep(0.05)

    def stop(self) -> Counter[str]:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        if self._errors:
            raise AssertionError(f"the workload failed: {self._errors[0]!r}") from self._errors[0]
        return self.counts

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counts[name] += amount

    def _run(self, index: int, seed: int) -> None:
        rng = random.Random(seed * 100 + index)
        connection = connect(self.dsn, f"pgshovel-e2e-workload-{index}")
        next_key = iter(range(KEY_SPACE * (index + 1), KEY_SPACE * (index + 2)))
        try:
            while not self._stop.is_set():
                try:
                    truncate = index == 0 and rng.random() < 0.002
                    with connection.cursor() as cursor:
                        if truncate:
                            self._truncate(cursor, rng, next_key.__next__)
                        else:
                            self._transaction(cursor, rng, next_key.__next__)
                    if rng.random() < 0.15:
                        connection.rollback()
                        self._count("aborted")
                    else:
                        connection.commit()
                        self._count("committed")
                        self._count("truncates committed", int(truncate))
                except (
                    psycopg2.errors.DeadlockDetected,
                    psycopg2.errors.SerializationFailure,
                ):
                    connection.rollback()
                    self._count("deadlocks")
                time.sleep(self.pause)
        except BaseException as error:
            self._errors.append(error)
        finally:
            connection.close()

    def _truncate(self, cursor: Cursor, rng: random.Random, key: Callable[[], int]) -> None:
        cursor.execute(sql.SQL("TRUNCATE {}").format(PAIRS.identifier))
        for _ in range(rng.randint(0, 20)):
            self._insert(cursor, PAIRS, pairs_row(rng, rng.choice(REGIONS), key()))

    def _transaction(self, cursor: Cursor, rng: random.Random, key: Callable[[], int]) -> None:
        for _ in range(rng.randint(1, 5)):
            self._statement(cursor, rng, key)
        if rng.random() < 0.15:
            cursor.execute("SAVEPOINT part")
            for _ in range(rng.randint(1, 3)):
                self._statement(cursor, rng, key)
            if rng.random() < 0.7:
                cursor.execute("ROLLBACK TO SAVEPOINT part")
                self._count("savepoint rollbacks")
            else:
                cursor.execute("RELEASE SAVEPOINT part")

    def _statement(self, cursor: Cursor, rng: random.Random, key: Callable[[], int]) -> None:
        table = rng.choice((ODD, PAIRS, MATRIX, MATRIX))
        # Picks over the loaded keys and (rarely) the whole key space of the threads.
        high = KEY_SPACE * 3 if rng.random() < 0.2 else 2000
        choice = rng.random()
        if choice < 0.35:
            if table is ODD:
                row: tuple[Any, ...] = odd_row(rng, key())
            elif table is PAIRS:
                row = pairs_row(rng, rng.choice(REGIONS), key())
            else:
                row = matrix_row(rng, key(), self.arrow_safe)
            self._insert(cursor, table, row)
            self._count("inserts")
        elif choice < 0.7:
            cursor.execute(
                sql.SQL("UPDATE {} SET {} WHERE {}").format(
                    table.identifier, self._assignments(table, rng), _pick(table, rng, high)
                )
            )
            self._count("updates", cursor.rowcount)
        elif choice < 0.85:
            new_key = key()
            target = sql.Identifier(table.key[-1])
            cursor.execute(
                sql.SQL("UPDATE {} SET {} = {} WHERE {}").format(
                    table.identifier, target, sql.Literal(new_key), _pick(table, rng, high)
                )
            )
            self._count("key changes", cursor.rowcount)
        else:
            cursor.execute(
                sql.SQL("DELETE FROM {} WHERE {}").format(table.identifier, _pick(table, rng, high))
            )
            self._count("deletes", cursor.rowcount)

    @staticmethod
    def _insert(cursor: Cursor, table: Table, row: tuple[Any, ...]) -> None:
        cursor.execute(
            sql.SQL("INSERT INTO {} VALUES ({})").format(
                table.identifier, sql.SQL(", ").join(sql.Placeholder() * len(row))
            ),
            row,
        )

    def _assignments(self, table: Table, rng: random.Random) -> sql.Composable:
        if table is MATRIX:
            columns = rng.sample(MATRIX_COLUMNS, rng.randint(1, 4))
            return sql.SQL(", ").join(
                sql.SQL("{} = {}").format(
                    sql.Identifier(column),
                    sql.Literal(matrix_value(rng, column, self.arrow_safe)),
                )
                for column in columns
            )
        if table is ODD:
            return sql.SQL('"Value Column" = {}, "qu""ote" = "qu""ote" + 1').format(
                sql.Literal(rng.choice(("ünï", "changed", None)))
            )
        return sql.SQL("payload = payload || '+', amount = {}").format(
            sql.Literal(rng.randrange(-(10**6), 10**6) / 100)
        )


class LargeTransactions:
    """One thread of transactions of thousands of rows on the bulk table, until stopped.

    Each transaction updates a range of 4,000 rows of ``public.bulk`` in one
    statement: new values, or every key of the range negated (a key change per
    row); every third one is rolled back. The row count never changes.
    """

    RANGE = 4000

    def __init__(self, dsn: str, rows: int, pause: float = 0.3) -> None:
        self.dsn = dsn
        self.rows = rows
        self.pause = pause
        self.committed = 0
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="large-transactions")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> int:
        """Stop; the number of large transactions committed."""
        self._stop.set()
        self._thread.join(120)
        if self._errors:
            raise AssertionError(f"large transactions failed: {self._errors[0]!r}")
        return self.committed

    def _run(self) -> None:
        try:
            connection = connect(self.dsn, "pgshovel-tests large")
        except BaseException as error:
            self._errors.append(error)
            return
        rng = random.Random(11)
        number = 0
        try:
            while not self._stop.is_set():
                number += 1
                low = rng.randrange(1, max(2, self.rows - self.RANGE))
                statement = (
                    "UPDATE bulk SET n = n + 1, body = md5(random()::text) "
                    "WHERE abs(id) BETWEEN %s AND %s"
                    if number % 2
                    else "UPDATE bulk SET id = -id WHERE abs(id) BETWEEN %s AND %s"
                )
                try:
                    with connection.cursor() as cursor:
                        cursor.execute(statement, (low, low + self.RANGE - 1))
                    if number % 3 == 0:
                        connection.rollback()
                    else:
                        connection.commit()
                        self.committed += 1
                except (psycopg2.errors.DeadlockDetected, psycopg2.errors.SerializationFailure):
                    connection.rollback()
                time.sleep(self.pause)
        except BaseException as error:
            self._errors.append(error)
        finally:
            connection.close()
