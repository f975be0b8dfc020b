"""The benchmark tables: an ``orders`` table of realistic row size and a latency probe table.

An ``orders`` row carries a bigint key, an integer, a short status, a
numeric amount, a timestamp with time zone and a 64-character note, about
200 bytes per captured event once framed, like a typical OLTP row.
Statements are built with psycopg2.sql only.
"""

from __future__ import annotations

from psycopg2 import sql

ORDERS = "orders"
LATENCY = "latency_probe"

ORDERS_DDL = sql.SQL(
    "CREATE TABLE {} ("
    " id bigint PRIMARY KEY,"
    " customer_id integer NOT NULL,"
    " status text NOT NULL,"
    " total numeric(12, 2) NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now(),"
    " note text)"
).format(sql.Identifier("public", ORDERS))

LATENCY_DDL = sql.SQL(
    "CREATE TABLE {} (id bigserial PRIMARY KEY, sent_us bigint NOT NULL, payload text)"
).format(sql.Identifier("public", LATENCY))


def insert_orders(first: int, count: int) -> sql.Composed:
    """INSERT ``count`` orders with ids ``first`` .. ``first + count - 1``."""
    return sql.SQL(
        "INSERT INTO {} (id, customer_id, status, total, note)"
        " SELECT i, (i * 7919) % 100000,"
        " (ARRAY['new', 'paid', 'shipped', 'delivered'])[1 + i % 4],"
        " ((i * 37) % 100000) / 100.0,"
        " md5(i::text) || md5((i + 1)::text)"
        " FROM generate_series({}::bigint, {}::bigint) AS i"
    ).format(sql.Identifier("public", ORDERS), sql.Literal(first), sql.Literal(first + count - 1))


def update_orders(first: int, count: int) -> sql.Composed:
    """UPDATE the status and total of orders ``first`` .. ``first + count - 1``."""
    return sql.SQL(
        "UPDATE {} SET status = 'paid', total = total + 1"
        " WHERE id BETWEEN {}::bigint AND {}::bigint"
    ).format(sql.Identifier("public", ORDERS), sql.Literal(first), sql.Literal(first + count - 1))


def delete_orders(first: int, count: int) -> sql.Composed:
    """DELETE orders ``first`` .. ``first + count - 1``."""
    return sql.SQL("DELETE FROM {} WHERE id BETWEEN {}::bigint AND {}::bigint").format(
        sql.Identifier("public", ORDERS), sql.Literal(first), sql.Literal(first + count - 1)
    )
