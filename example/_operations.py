"""What the example workload does, decided without touching a database.

A client owns a :class:`ClientState` (the orders it may change, the ids it may
hand out) and asks :func:`plan_transaction` for the next transaction: one to
three operations chosen by weight from a seeded ``random.Random``, sometimes
marked to end in ROLLBACK, sometimes with an order line written inside a
savepoint and rolled back to it. Only after the transaction committed does
:meth:`ClientState.committed` record its effects. The same seed and the same
outcomes give the same transactions, so runs can be compared.

Clients never share orders (each owns the seed orders whose id is congruent to
its index, plus the ones it creates) and allocate ids from disjoint ranges, so
concurrent clients do not fight over the same rows. The ranges start above
every id already in the shop (:func:`first_free_id`), so a second run of the
workload on the same database creates new rows instead of duplicate keys.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

# Ids the workload creates start here; seed data stays below.
ORDER_ID_BASE = 1_000_000
CUSTOMER_ID_BASE = 1_000_000
MAX_LINES = 5

NEXT_STATUS: Mapping[str, str] = {"new": "paid", "paid": "shipped", "shipped": "delivered"}
CANCELLABLE = frozenset({"new", "paid"})

NOTE_TEXTS = (
    "left at the front door",
    "customer asked for a call before delivery",
    "fragile: double boxed",
    "partial shipment, rest follows",
    "gift wrap requested",
)
TAGS = ("sale", "new", "eco", "bestseller", "limited", "bundle")
THEMES = ("light", "dark", "system")


@dataclass(frozen=True)
class Line:
    """An order line; the unit price is read from ``products`` when it is written."""

    line_no: int
    product_id: int
    quantity: int


@dataclass(frozen=True)
class NewOrder:
    order_id: int
    customer_id: int
    lines: tuple[Line, ...]
    # Written inside a savepoint that is then rolled back: never replicated.
    discarded_line: Line | None = None


@dataclass(frozen=True)
class AdvanceStatus:
    order_id: int
    status: str
    note: str | None = None


@dataclass(frozen=True)
class CancelOrder:
    order_id: int


@dataclass(frozen=True)
class DeleteOrder:
    """Delete a cancelled order; its lines and notes go with it (ON DELETE CASCADE)."""

    order_id: int


@dataclass(frozen=True)
class RenumberOrder:
    """Change an order's primary key; lines and notes follow (ON UPDATE CASCADE)."""

    order_id: int
    new_id: int


@dataclass(frozen=True)
class ChangePrice:
    product_id: int
    percent: int
    tag: str


@dataclass(frozen=True)
class NewCustomer:
    customer_id: int
    email: str
    name: str
    preferences: Mapping[str, object]


@dataclass(frozen=True)
class UpdatePreferences:
    customer_id: int
    preferences: Mapping[str, object]


Operation = (
    NewOrder
    | AdvanceStatus
    | CancelOrder
    | DeleteOrder
    | RenumberOrder
    | ChangePrice
    | NewCustomer
    | UpdatePreferences
)

# Relative frequency of each operation; ones that find nothing to act on fall
# back to a new order.
WEIGHTS: Mapping[str, int] = {
    "new_order": 30,
    "advance_status": 25,
    "cancel_order": 6,
    "delete_order": 5,
    "renumber_order": 2,
    "change_price": 8,
    "new_customer": 6,
    "update_preferences": 8,
}


@dataclass(frozen=True)
class Transaction:
    operations: tuple[Operation, ...]
    # True: run every statement, then ROLLBACK on purpose.
    rollback: bool = False

    @property
    def uses_savepoint(self) -> bool:
        return any(isinstance(op, NewOrder) and op.discarded_line for op in self.operations)


@dataclass
class ClientState:
    """One client's view: its orders and their status, the customers and products it may use."""

    index: int
    clients: int
    product_ids: Sequence[int]
    customer_ids: list[int]
    orders: dict[int, str] = field(default_factory=dict)
    own_customers: list[int] = field(default_factory=list)
    allocated: int = 0
    # Where new ids start: above every id in the shop (see first_free_id).
    order_id_base: int = ORDER_ID_BASE
    customer_id_base: int = CUSTOMER_ID_BASE

    def next_order_id(self) -> int:
        return self._allocate(self.order_id_base)

    def next_customer_id(self) -> int:
        return self._allocate(self.customer_id_base)

    def _allocate(self, base: int) -> int:
        # Disjoint per client: base + index, base + index + clients, ...
        self.allocated += 1
        return base + self.index + self.clients * self.allocated

    def committed(self, transaction: Transaction) -> None:
        """Record the effects of ``transaction`` after it committed."""
        for operation in transaction.operations:
            if isinstance(operation, NewOrder):
                self.orders[operation.order_id] = "new"
            elif isinstance(operation, AdvanceStatus):
                self.orders[operation.order_id] = operation.status
            elif isinstance(operation, CancelOrder):
                self.orders[operation.order_id] = "cancelled"
            elif isinstance(operation, DeleteOrder):
                self.orders.pop(operation.order_id, None)
            elif isinstance(operation, RenumberOrder):
                self.orders[operation.new_id] = self.orders.pop(operation.order_id)
            elif isinstance(operation, NewCustomer):
                self.customer_ids.append(operation.customer_id)
                self.own_customers.append(operation.customer_id)


def first_free_id(existing: Iterable[int], base: int) -> int:
    """Where a run's new ids start: ``base``, or above the largest id already there."""
    return max(base, max(existing, default=base - 1) + 1)


def owned_orders(orders: Mapping[int, str], index: int, clients: int) -> dict[int, str]:
    """The existing orders client ``index`` of ``clients`` may change."""
    return {order: status for order, status in orders.items() if order % clients == index}


def plan_transaction(
    rng: random.Random, state: ClientState, aborted_ratio: float, savepoint_ratio: float = 0.05
) -> Transaction:
    """The client's next transaction: 1-3 operations on rows it owns (``state`` is not changed).

    Ids are allocated from ``state`` even when the transaction will roll back:
    ids only need to be unique, not dense.
    """
    count = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    planned: list[Operation] = []
    touched: set[int] = set()
    for _ in range(count):
        operation = _plan_operation(rng, state, touched, savepoint_ratio)
        planned.append(operation)
        touched.update(_orders_of(operation))
    return Transaction(tuple(planned), rollback=rng.random() < aborted_ratio)


def _orders_of(operation: Operation) -> tuple[int, ...]:
    if isinstance(operation, NewOrder | AdvanceStatus | CancelOrder | DeleteOrder):
        return (operation.order_id,)
    if isinstance(operation, RenumberOrder):
        return (operation.order_id, operation.new_id)
    return ()


def _plan_operation(
    rng: random.Random, state: ClientState, touched: set[int], savepoint_ratio: float
) -> Operation:
    kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    # One operation per order and transaction keeps the planned statuses valid.
    free = {order: status for order, status in state.orders.items() if order not in touched}
    if kind == "advance_status":
        movable = sorted(order for order, status in free.items() if status in NEXT_STATUS)
        if movable:
            order = rng.choice(movable)
            status = NEXT_STATUS[free[order]]
            note = rng.choice(NOTE_TEXTS) if status == "shipped" else None
            return AdvanceStatus(order, status, note)
    elif kind == "cancel_order":
        open_orders = sorted(order for order, status in free.items() if status in CANCELLABLE)
        if open_orders:
            return CancelOrder(rng.choice(open_orders))
    elif kind == "delete_order":
        cancelled = sorted(order for order, status in free.items() if status == "cancelled")
        if cancelled:
            return DeleteOrder(rng.choice(cancelled))
    elif kind == "renumber_order" and free:
        return RenumberOrder(rng.choice(sorted(free)), state.next_order_id())
    elif kind == "change_price" and state.product_ids:
        return ChangePrice(
            rng.choice(list(state.product_ids)), rng.choice((-10, -5, 5, 10, 15)), rng.choice(TAGS)
        )
    elif kind == "new_customer":
        customer = state.next_customer_id()
        return NewCustomer(
            customer,
            f"customer{customer}@example.com",
            f"Customer {customer}",
            preferences(rng),
        )
    elif kind == "update_preferences" and state.own_customers:
        return UpdatePreferences(rng.choice(state.own_customers), preferences(rng))
    return _new_order(rng, state, savepoint_ratio)


def _new_order(rng: random.Random, state: ClientState, savepoint_ratio: float) -> NewOrder:
    products = list(state.product_ids)
    count = rng.randint(1, MAX_LINES)
    lines = tuple(
        Line(number, rng.choice(products), rng.randint(1, 4)) for number in range(1, count + 1)
    )
    discarded = None
    if rng.random() < savepoint_ratio:
        discarded = Line(count + 1, rng.choice(products), rng.randint(1, 4))
    return NewOrder(state.next_order_id(), rng.choice(state.customer_ids), lines, discarded)


def preferences(rng: random.Random) -> dict[str, object]:
    """A customer's preferences document (jsonb): nested values of several JSON types."""
    return {
        "newsletter": rng.random() < 0.5,
        "theme": rng.choice(THEMES),
        "limits": {"daily": rng.randint(1, 20) * 50, "currency": "EUR"},
        "favourite_tags": sorted(rng.sample(TAGS, rng.randint(0, 3))),
    }


def order_total(lines: Sequence[tuple[int, Decimal]]) -> Decimal:
    """Sum of quantity x unit price over ``(quantity, unit_price)`` pairs, exact to the cent."""
    return sum((quantity * price for quantity, price in lines), Decimal("0.00")).quantize(
        Decimal("0.01")
    )
