"""The example shop's seed data: reproducible, consistent with the schema's keys and totals."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from example._seed import seed_data


def test_the_same_seed_gives_the_same_rows() -> None:
    assert seed_data(5) == seed_data(5)
    assert seed_data(5).products != seed_data(6).products


def test_keys_are_unique_and_references_resolve() -> None:
    data = seed_data(1, products=10, customers=20, orders=50)
    products = {row[0] for row in data.products}
    customers = {row[0] for row in data.customers}
    orders = {row[0] for row in data.orders}
    assert len(products) == 10 and len(customers) == 20 and len(orders) == 50
    assert len({row[1] for row in data.products}) == 10  # sku is unique
    assert len({row[1] for row in data.customers}) == 20  # email is unique
    assert {row[1] for row in data.orders} <= customers
    assert {row[2] for row in data.order_lines} <= products
    assert {row[0] for row in data.order_lines} == orders  # every order has lines
    line_keys = [(row[0], row[1]) for row in data.order_lines]
    assert len(line_keys) == len(set(line_keys))
    assert {row[0] for row in data.shipping_notes} <= orders


def test_order_totals_equal_their_lines_at_the_product_price() -> None:
    data = seed_data(2)
    prices = {row[0]: row[3] for row in data.products}
    sums: dict[int, Decimal] = defaultdict(Decimal)
    for order_id, _line, product, quantity, unit_price in data.order_lines:
        assert unit_price == prices[product]
        sums[order_id] += quantity * unit_price
    for order_id, _customer, _status, _placed_at, total in data.orders:
        assert total == sums[order_id]
        assert total.as_tuple().exponent == -2


def test_only_orders_that_left_the_warehouse_have_notes() -> None:
    data = seed_data(3)
    status = {row[0]: row[2] for row in data.orders}
    assert data.shipping_notes
    assert all(
        status[order] in ("shipped", "delivered") for order, _at, _note in data.shipping_notes
    )
    assert all(row[3].tzinfo is not None for row in data.orders)  # timestamptz values
