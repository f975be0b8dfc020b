"""The example shop's starting data, generated from a seed without touching a database.

:func:`seed_data` returns rows for every table of example/schema.sql: products
with tags and jsonb attributes, customers with preferences, orders in every
status with their lines (totals computed exactly from the lines) and shipping
notes for orders that left the warehouse. The same seed gives the same rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from example._operations import NOTE_TEXTS, TAGS, order_total, preferences

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
STATUSES = ("new", "paid", "shipped", "delivered", "cancelled")
ADJECTIVES = ("Sturdy", "Tiny", "Blue", "Quiet", "Smart", "Organic", "Classic", "Rapid")
NOUNS = ("Kettle", "Lamp", "Backpack", "Notebook", "Chair", "Headphones", "Mug", "Jacket")
FIRST_NAMES = ("Ana", "Bo", "Chloé", "Dmitri", "Eun-ji", "Farah", "Gustav", "Hiroshi", "Inés")
LAST_NAMES = ("Okafor", "Müller", "Nakamura", "O'Brien", "Silva", "Kowalski", "Haddad")

ProductRow = tuple[int, str, str, Decimal, list[str], dict[str, object]]
CustomerRow = tuple[int, str, str, datetime, dict[str, object] | None]
OrderRow = tuple[int, int, str, datetime, Decimal]
LineRow = tuple[int, int, int, int, Decimal]
NoteRow = tuple[int, datetime, str]


@dataclass(frozen=True)
class SeedData:
    products: list[ProductRow]
    customers: list[CustomerRow]
    orders: list[OrderRow]
    order_lines: list[LineRow]
    shipping_notes: list[NoteRow]


def seed_data(seed: int, products: int = 40, customers: int = 150, orders: int = 400) -> SeedData:
    """Rows for a shop of the given size; ids start at 1 in every table."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    product_rows = [_product(rng, number) for number in range(1, products + 1)]
    prices = {row[0]: row[3] for row in product_rows}
    customer_rows = [_customer(rng, number) for number in range(1, customers + 1)]
    order_rows: list[OrderRow] = []
    line_rows: list[LineRow] = []
    note_rows: list[NoteRow] = []
    for order_id in range(1, orders + 1):
        placed_at = EPOCH + timedelta(minutes=order_id * 7, microseconds=rng.randint(0, 999_999))
        lines: list[LineRow] = []
        for line_no in range(1, rng.randint(1, 4) + 1):
            product = rng.randint(1, products)
            lines.append((order_id, line_no, product, rng.randint(1, 5), prices[product]))
        status = rng.choice(STATUSES)
        total = order_total([(line[3], line[4]) for line in lines])
        order_rows.append((order_id, rng.randint(1, customers), status, placed_at, total))
        line_rows.extend(lines)
        if status in ("shipped", "delivered"):
            note_rows.append((order_id, placed_at + timedelta(hours=20), rng.choice(NOTE_TEXTS)))
    return SeedData(product_rows, customer_rows, order_rows, line_rows, note_rows)


def _product(rng: random.Random, number: int) -> ProductRow:
    name = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    price = (Decimal(rng.randint(199, 49_999)) / 100).quantize(Decimal("0.01"))
    tags = sorted(rng.sample(TAGS, rng.randint(0, 3)))
    attributes: dict[str, object] = {
        "weight_grams": rng.randint(50, 5000),
        "colors": rng.sample(["red", "green", "black", "white"], rng.randint(1, 3)),
        "dimensions": {"w": rng.randint(1, 80), "h": rng.randint(1, 80), "unit": "cm"},
    }
    return (number, f"SKU-{number:05d}", name, price, tags, attributes)


def _customer(rng: random.Random, number: int) -> CustomerRow:
    name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
    created_at = EPOCH - timedelta(days=rng.randint(0, 900), seconds=rng.randint(0, 86_399))
    chosen = preferences(rng) if rng.random() < 0.8 else None
    return (number, f"shopper{number}@example.com", name, created_at, chosen)
