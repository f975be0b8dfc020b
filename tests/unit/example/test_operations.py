"""The workload's planning: deterministic per seed, valid transitions, disjoint ids per client."""

from __future__ import annotations

import random
from decimal import Decimal

from example._operations import (
    NEXT_STATUS,
    ORDER_ID_BASE,
    AdvanceStatus,
    CancelOrder,
    ClientState,
    DeleteOrder,
    NewCustomer,
    NewOrder,
    RenumberOrder,
    Transaction,
    first_free_id,
    order_total,
    owned_orders,
    plan_transaction,
)

SEED_ORDERS = {1: "new", 2: "paid", 3: "shipped", 4: "cancelled", 5: "delivered", 6: "new"}


def client(index: int = 0, clients: int = 2) -> ClientState:
    return ClientState(
        index=index,
        clients=clients,
        product_ids=[1, 2, 3],
        customer_ids=[1, 2],
        orders=owned_orders(SEED_ORDERS, index, clients),
    )


def simulate(seed: int, index: int = 0, count: int = 300, ratio: float = 0.1) -> list[Transaction]:
    """Plan ``count`` transactions, committing the ones not marked to roll back."""
    rng = random.Random(seed)
    state = client(index)
    planned = []
    for _ in range(count):
        transaction = plan_transaction(rng, state, ratio)
        if not transaction.rollback:
            state.committed(transaction)
        planned.append(transaction)
    return planned


def test_the_same_seed_plans_the_same_transactions() -> None:
    assert simulate(7) == simulate(7)
    assert simulate(7) != simulate(8)


def test_clients_own_disjoint_orders_and_allocate_disjoint_ids() -> None:
    first, second = owned_orders(SEED_ORDERS, 0, 2), owned_orders(SEED_ORDERS, 1, 2)
    assert set(first) | set(second) == set(SEED_ORDERS)
    assert not set(first) & set(second)
    a, b = client(0), client(1)
    ids_a = {a.next_order_id() for _ in range(100)} | {a.next_customer_id() for _ in range(100)}
    ids_b = {b.next_order_id() for _ in range(100)} | {b.next_customer_id() for _ in range(100)}
    assert not ids_a & ids_b
    assert len(ids_a) == 200  # no id handed out twice


def test_every_operation_acts_on_a_row_in_a_valid_state() -> None:
    rng = random.Random(3)
    state = client(0)
    kinds = set()
    for _ in range(2000):
        transaction = plan_transaction(rng, state, aborted_ratio=0.0)
        touched: list[int] = []
        for operation in transaction.operations:
            kinds.add(type(operation).__name__)
            if isinstance(operation, AdvanceStatus):
                assert NEXT_STATUS[state.orders[operation.order_id]] == operation.status
                assert (operation.note is not None) == (operation.status == "shipped")
            elif isinstance(operation, CancelOrder):
                assert state.orders[operation.order_id] in ("new", "paid")
            elif isinstance(operation, DeleteOrder):
                assert state.orders[operation.order_id] == "cancelled"
            elif isinstance(operation, RenumberOrder):
                assert operation.order_id in state.orders
                assert operation.new_id not in state.orders
            elif isinstance(operation, NewOrder):
                assert operation.customer_id in state.customer_ids
                assert [line.line_no for line in operation.lines] == list(
                    range(1, len(operation.lines) + 1)
                )
            if hasattr(operation, "order_id"):
                touched.append(operation.order_id)
        # One operation per order and transaction.
        assert len(touched) == len(set(touched))
        state.committed(transaction)
    assert kinds == {
        "NewOrder",
        "AdvanceStatus",
        "CancelOrder",
        "DeleteOrder",
        "RenumberOrder",
        "ChangePrice",
        "NewCustomer",
        "UpdatePreferences",
    }


def test_committed_transactions_update_the_clients_view() -> None:
    state = client(0)
    order = state.next_order_id()
    customer = state.next_customer_id()
    state.committed(
        Transaction(
            (
                NewOrder(order, 1, ()),
                NewCustomer(customer, "c@example.com", "C", {}),
                RenumberOrder(2, 9_999_999),
            )
        )
    )
    assert state.orders[order] == "new"
    assert 2 not in state.orders and state.orders[9_999_999] == "paid"
    assert customer in state.customer_ids and customer in state.own_customers
    state.committed(Transaction((CancelOrder(order),)))
    state.committed(Transaction((DeleteOrder(order),)))
    assert order not in state.orders


def test_a_share_of_transactions_rolls_back_and_some_use_a_savepoint() -> None:
    planned = simulate(11, count=1000, ratio=0.2)
    rolled_back = sum(transaction.rollback for transaction in planned)
    assert 120 < rolled_back < 280
    assert any(transaction.uses_savepoint for transaction in planned)
    assert not any(t.rollback for t in simulate(11, count=300, ratio=0.0))


def test_order_total_is_exact_to_the_cent() -> None:
    assert order_total([(3, Decimal("0.10")), (1, Decimal("19.99"))]) == Decimal("20.29")
    assert order_total([]) == Decimal("0.00")


def test_a_second_run_allocates_above_every_existing_id() -> None:
    assert first_free_id([1, 2, 3], ORDER_ID_BASE) == ORDER_ID_BASE
    assert first_free_id([], ORDER_ID_BASE) == ORDER_ID_BASE
    # The first run's clients allocated up to here; the next run starts above.
    existing = [5, ORDER_ID_BASE + 7, ORDER_ID_BASE + 12]
    base = first_free_id(existing, ORDER_ID_BASE)
    for clients in (1, 2, 3):
        for index in range(clients):
            state = ClientState(
                index=index,
                clients=clients,
                product_ids=[1],
                customer_ids=[1],
                order_id_base=base,
            )
            assert min(state.next_order_id() for _ in range(50)) > max(existing)
