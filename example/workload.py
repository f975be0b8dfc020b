"""The example shop's workload: concurrent clients running realistic transactions on the source.

    python -m example.workload --dsn DSN --seconds 60 --clients 4 --seed 1 \
        [--aborted-ratio 0.1] [--rate 200] [--populate]

Each client thread has its own connection and runs transactions that
:mod:`example._operations` plans: new orders with lines (sometimes one line
written in a savepoint and rolled back to it), status changes with shipping
notes, cancellations, deletions of cancelled orders (their lines and notes
cascade), product price changes, customers and their jsonb preferences, and
now and then an order moved to a new primary key. A share of transactions
(``aborted_ratio``) ends in ROLLBACK on purpose: none of their changes may
reach the replica. ``--populate`` loads seed data first (an empty shop needs it).
Runs can be repeated on the same database: ``--schema`` and ``--populate``
skip what is already there, and new orders and customers get ids above the
existing ones.

From Python: ``run_workload(dsn, seconds, clients, seed)`` returns the
:class:`WorkloadStats`; :class:`Workload` runs in the background with live
counters (the demo uses it).
"""

from __future__ import annotations

import argparse
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
import psycopg2.errors
from psycopg2 import sql
from psycopg2.extensions import connection as Connection
from psycopg2.extensions import cursor as Cursor
from psycopg2.extras import Json, execute_values

from example._operations import (
    CUSTOMER_ID_BASE,
    ORDER_ID_BASE,
    AdvanceStatus,
    CancelOrder,
    ChangePrice,
    ClientState,
    DeleteOrder,
    NewCustomer,
    NewOrder,
    Operation,
    RenumberOrder,
    Transaction,
    UpdatePreferences,
    first_free_id,
    owned_orders,
    plan_transaction,
)
from example._seed import SeedData, seed_data
from pgshovel.errors import DatabaseError

logger = logging.getLogger(__name__)

SCHEMA_FILE = Path(__file__).resolve().parent / "schema.sql"
APPLICATION_NAME = "pgshovel-example-workload"
NOTES = sql.Identifier("Shipping Notes")
# Conflicts between clients (rare: they own disjoint orders) are retried, not failures.
RETRYABLE = (psycopg2.errors.DeadlockDetected, psycopg2.errors.SerializationFailure)


@dataclass(frozen=True)
class WorkloadStats:
    """What the clients did: transactions committed, rolled back on purpose, retried."""

    committed: int = 0
    aborted: int = 0
    retried: int = 0
    savepoint_rollbacks: int = 0
    operations: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def per_second(self) -> float:
        return self.committed / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        return (
            f"{self.committed} transactions committed ({self.per_second:.0f}/s), "
            f"{self.aborted} rolled back on purpose, {self.savepoint_rollbacks} savepoint "
            f"rollbacks, {self.retried} retried after a conflict"
        )


@dataclass
class _Counters:
    committed: int = 0
    aborted: int = 0
    retried: int = 0
    savepoint_rollbacks: int = 0
    operations: Counter[str] = field(default_factory=Counter)


def connect(dsn: str) -> Connection:
    try:
        return psycopg2.connect(dsn, application_name=APPLICATION_NAME)
    except psycopg2.Error as error:
        raise DatabaseError(
            f"the workload cannot connect to the source: {str(error).strip()}; "
            "check the DSN and that the server runs"
        ) from error


def load_schema(dsn: str, path: Path = SCHEMA_FILE) -> None:
    """Create the example tables (example/schema.sql) in the database at ``dsn``."""
    connection = connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(path.read_text(encoding="utf-8"))
    except psycopg2.Error as error:
        raise DatabaseError(
            f"loading {str(path)!r} failed: {str(error).strip()}; the database must be empty"
        ) from error
    finally:
        connection.close()


def schema_loaded(dsn: str) -> bool:
    """True when the example's tables exist in the database at ``dsn``."""
    return _fetch_one(dsn, "SELECT to_regclass('orders') IS NOT NULL") is True


def shop_is_empty(dsn: str) -> bool:
    """True when the example's tables hold no product and no customer."""
    return (
        _fetch_one(
            dsn,
            "SELECT NOT EXISTS (SELECT FROM products) AND NOT EXISTS (SELECT FROM customers)",
        )
        is True
    )


def _fetch_one(dsn: str, query: str) -> object:
    connection = connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(query)
            row = cursor.fetchone()
    except psycopg2.Error as error:
        raise DatabaseError(
            f"reading the shop failed: {str(error).strip()}; load example/schema.sql first"
        ) from error
    finally:
        connection.close()
    return None if row is None else row[0]


def populate(dsn: str, seed: int, data: SeedData | None = None) -> SeedData:
    """Insert the seed data (:func:`example._seed.seed_data`) into the empty example tables."""
    data = data if data is not None else seed_data(seed)
    connection = connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            execute_values(
                cursor,
                "INSERT INTO products (id, sku, name, price, tags, attributes) VALUES %s",
                [(*row[:5], Json(row[5])) for row in data.products],
            )
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence('products', 'id'), max(id)) FROM products"
            )
            execute_values(
                cursor,
                "INSERT INTO customers (id, email, name, created_at, preferences) VALUES %s",
                [(*row[:4], None if row[4] is None else Json(row[4])) for row in data.customers],
            )
            execute_values(
                cursor,
                "INSERT INTO orders (id, customer_id, status, placed_at, total) VALUES %s",
                data.orders,
            )
            execute_values(
                cursor,
                "INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price) "
                "VALUES %s",
                data.order_lines,
            )
            execute_values(
                cursor,
                sql.SQL('INSERT INTO {} ("Order Id", "Written At", "Note") VALUES %s')
                .format(NOTES)
                .as_string(cursor),
                data.shipping_notes,
            )
    except psycopg2.Error as error:
        raise DatabaseError(
            f"inserting the seed data failed: {str(error).strip()}; "
            "load example/schema.sql into an empty database first"
        ) from error
    finally:
        connection.close()
    return data


class Workload:
    """``clients`` threads running transactions until :meth:`stop` (or a client fails)."""

    def __init__(
        self,
        dsn: str,
        clients: int,
        seed: int,
        aborted_ratio: float = 0.1,
        rate: float | None = None,
    ) -> None:
        if clients < 1:
            raise ValueError(f"clients must be at least 1, got {clients!r}")
        if not 0.0 <= aborted_ratio < 1.0:
            raise ValueError(f"aborted_ratio must be in [0, 1), got {aborted_ratio!r}")
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive transactions per second, got {rate!r}")
        self.dsn = dsn
        self.clients = clients
        self.seed = seed
        self.aborted_ratio = aborted_ratio
        # Seconds between one client's transactions; 0: as fast as it can.
        self.interval = clients / rate if rate else 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._counters = [_Counters() for _ in range(clients)]
        self._errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._started = 0.0
        self._finished: float | None = None

    def start(self) -> None:
        products, customers, orders = _read_shop(self.dsn)
        if not products or not customers:
            raise DatabaseError(
                f"the shop at the source has {len(products)} product(s) and {len(customers)} "
                "customer(s): populate it first (python -m example.workload --populate ...)"
            )
        self._started = time.monotonic()
        order_id_base = first_free_id(orders, ORDER_ID_BASE)
        customer_id_base = first_free_id(customers, CUSTOMER_ID_BASE)
        for index in range(self.clients):
            state = ClientState(
                index=index,
                clients=self.clients,
                product_ids=products,
                customer_ids=list(customers),
                orders=owned_orders(orders, index, self.clients),
                order_id_base=order_id_base,
                customer_id_base=customer_id_base,
            )
            thread = threading.Thread(
                target=self._client, args=(state,), name=f"workload client {index}"
            )
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        self._stop.set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the workload stopped early (a client failed)."""
        return self._stop.wait(seconds)

    def join(self) -> WorkloadStats:
        """Wait for every client; raise the first client's failure if there was one."""
        for thread in self._threads:
            thread.join()
        if self._finished is None:
            self._finished = time.monotonic()
        if self._errors:
            error = self._errors[0]
            raise DatabaseError(f"a workload client failed: {error}") from error
        return self.stats()

    @property
    def failed(self) -> bool:
        return bool(self._errors)

    def stats(self) -> WorkloadStats:
        """The counters so far (safe to call while the clients run)."""
        with self._lock:
            operations: Counter[str] = Counter()
            for counters in self._counters:
                operations.update(counters.operations)
            end = self._finished if self._finished is not None else time.monotonic()
            return WorkloadStats(
                committed=sum(c.committed for c in self._counters),
                aborted=sum(c.aborted for c in self._counters),
                retried=sum(c.retried for c in self._counters),
                savepoint_rollbacks=sum(c.savepoint_rollbacks for c in self._counters),
                operations=dict(operations),
                seconds=end - self._started if self._started else 0.0,
            )

    def _client(self, state: ClientState) -> None:
        rng = random.Random(self.seed * 1000 + state.index)  # noqa: S311 - test data
        counters = self._counters[state.index]
        try:
            connection = connect(self.dsn)
        except DatabaseError as error:
            self._fail(error)
            return
        try:
            next_start = time.monotonic()
            while not self._stop.is_set():
                transaction = plan_transaction(rng, state, self.aborted_ratio)
                outcome = _run(connection, transaction)
                with self._lock:
                    if outcome == "committed":
                        counters.committed += 1
                        counters.operations.update(_kind(op) for op in transaction.operations)
                        counters.savepoint_rollbacks += transaction.uses_savepoint
                    elif outcome == "aborted":
                        counters.aborted += 1
                    else:
                        counters.retried += 1
                if outcome == "committed":
                    state.committed(transaction)
                next_start += self.interval
                self._stop.wait(max(0.0, next_start - time.monotonic()))
        except BaseException as error:
            self._fail(error)
        finally:
            connection.close()

    def _fail(self, error: BaseException) -> None:
        logger.error("workload client failed: %s", error)
        with self._lock:
            self._errors.append(error)
        self._stop.set()


def run_workload(
    dsn: str,
    seconds: float,
    clients: int,
    seed: int,
    aborted_ratio: float = 0.1,
    rate: float | None = None,
) -> WorkloadStats:
    """Run the workload for ``seconds`` and return what it did."""
    workload = Workload(dsn, clients, seed, aborted_ratio, rate)
    workload.start()
    try:
        workload.wait(seconds)
    finally:
        workload.stop()
    return workload.join()


def _read_shop(dsn: str) -> tuple[list[int], list[int], dict[int, str]]:
    connection = connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute("SELECT id FROM products ORDER BY id")
            products = [row[0] for row in cursor.fetchall()]
            cursor.execute("SELECT id FROM customers ORDER BY id")
            customers = [row[0] for row in cursor.fetchall()]
            cursor.execute("SELECT id, status FROM orders ORDER BY id")
            orders = {row[0]: row[1] for row in cursor.fetchall()}
    except psycopg2.Error as error:
        raise DatabaseError(
            f"reading the shop failed: {str(error).strip()}; load example/schema.sql first"
        ) from error
    finally:
        connection.close()
    return products, customers, orders


def _run(connection: Connection, transaction: Transaction) -> str:
    """Run one transaction; return ``committed``, ``aborted`` (on purpose) or ``retried``."""
    try:
        with connection.cursor() as cursor:
            for operation in transaction.operations:
                _execute(cursor, operation)
        if transaction.rollback:
            connection.rollback()
            return "aborted"
        connection.commit()
        return "committed"
    except RETRYABLE:
        connection.rollback()
        return "retried"
    except BaseException:
        connection.rollback()
        raise


def _execute(cursor: Cursor, operation: Operation) -> None:
    if isinstance(operation, NewOrder):
        _new_order(cursor, operation)
    elif isinstance(operation, AdvanceStatus):
        cursor.execute(
            "UPDATE orders SET status = %s WHERE id = %s", (operation.status, operation.order_id)
        )
        if operation.note is not None:
            cursor.execute(
                sql.SQL(
                    'INSERT INTO {} ("Order Id", "Written At", "Note") '
                    "VALUES (%s, clock_timestamp(), %s)"
                ).format(NOTES),
                (operation.order_id, operation.note),
            )
    elif isinstance(operation, CancelOrder):
        cursor.execute(
            "UPDATE orders SET status = 'cancelled' WHERE id = %s", (operation.order_id,)
        )
    elif isinstance(operation, DeleteOrder):
        cursor.execute("DELETE FROM orders WHERE id = %s", (operation.order_id,))
    elif isinstance(operation, RenumberOrder):
        cursor.execute(
            "UPDATE orders SET id = %s WHERE id = %s", (operation.new_id, operation.order_id)
        )
    elif isinstance(operation, ChangePrice):
        cursor.execute(
            "UPDATE products SET price = round(price * (100 + %(percent)s) / 100, 2),"
            " tags = CASE WHEN %(tag)s = ANY (tags) THEN array_remove(tags, %(tag)s)"
            " ELSE array_append(tags, %(tag)s) END,"
            " attributes = attributes || jsonb_build_object('last_change_percent', %(percent)s)"
            " WHERE id = %(id)s",
            {"percent": operation.percent, "tag": operation.tag, "id": operation.product_id},
        )
    elif isinstance(operation, NewCustomer):
        cursor.execute(
            "INSERT INTO customers (id, email, name, created_at, preferences)"
            " VALUES (%s, %s, %s, clock_timestamp(), %s)",
            (
                operation.customer_id,
                operation.email,
                operation.name,
                Json(dict(operation.preferences)),
            ),
        )
    elif isinstance(operation, UpdatePreferences):
        cursor.execute(
            "UPDATE customers SET preferences = %s WHERE id = %s",
            (Json(dict(operation.preferences)), operation.customer_id),
        )


def _new_order(cursor: Cursor, order: NewOrder) -> None:
    cursor.execute(
        "INSERT INTO orders (id, customer_id, status, placed_at, total)"
        " VALUES (%s, %s, 'new', clock_timestamp(), 0)",
        (order.order_id, order.customer_id),
    )
    insert_line = (
        "INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price)"
        " SELECT %s, %s, id, %s, price FROM products WHERE id = %s"
    )
    for line in order.lines:
        cursor.execute(insert_line, (order.order_id, line.line_no, line.quantity, line.product_id))
    if order.discarded_line is not None:
        line = order.discarded_line
        cursor.execute("SAVEPOINT extra_line")
        cursor.execute(insert_line, (order.order_id, line.line_no, line.quantity, line.product_id))
        cursor.execute("ROLLBACK TO SAVEPOINT extra_line")
    cursor.execute(
        "UPDATE orders SET total = (SELECT coalesce(sum(quantity * unit_price), 0)"
        " FROM order_lines WHERE order_id = %s) WHERE id = %s",
        (order.order_id, order.order_id),
    )


def _kind(operation: Operation) -> str:
    return type(operation).__name__


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m example.workload", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dsn", required=True, help="libpq connection string of the source")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run (60)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent client threads (4)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument(
        "--aborted-ratio", type=float, default=0.1, help="share of transactions rolled back (0.1)"
    )
    parser.add_argument("--rate", type=float, default=None, help="total transactions per second")
    parser.add_argument(
        "--populate",
        action="store_true",
        help="insert the seed data before running, unless the shop holds data",
    )
    parser.add_argument(
        "--schema",
        action="store_true",
        help="load example/schema.sql first unless its tables exist (implies --populate)",
    )
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        if arguments.schema:
            if schema_loaded(arguments.dsn):
                logger.info("the shop's tables exist already: not loading the schema")
            else:
                load_schema(arguments.dsn)
        if arguments.schema or arguments.populate:
            if shop_is_empty(arguments.dsn):
                populate(arguments.dsn, arguments.seed)
            else:
                logger.info("the shop holds data already: not inserting the seed data")
        stats = run_workload(
            arguments.dsn,
            arguments.seconds,
            arguments.clients,
            arguments.seed,
            arguments.aborted_ratio,
            arguments.rate,
        )
    except (DatabaseError, ValueError) as error:
        parser.exit(1, f"error: {error}\n")
    print(stats.summary())
    for kind, count in sorted(stats.operations.items()):
        print(f"  {kind:<18} {count}")


if __name__ == "__main__":
    main()
