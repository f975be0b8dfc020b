-- schema.sql — the example application pgshovel replicates: a small shop.
--
--   psql "$PGSHOVEL_SOURCE_DSN" -f example/schema.sql
--
-- Load it into the source database only. The replication worker creates the
-- target's tables itself (same column types and primary key, no defaults,
-- foreign keys or indexes beyond the key), so the target starts empty.
--
-- The tables use the types pgshovel must carry without loss: numeric with
-- exact scale, timestamptz, jsonb, text arrays, a composite primary key, and
-- one table whose name needs quoting ("Shipping Notes": mixed case and a
-- space). Every table has a primary key: the capture triggers need one (or
-- key_columns in set.yml) to turn UPDATE and DELETE into keyed changes.
-- No enum or domain types: the target would need them created first.

CREATE TABLE products (
    id          serial PRIMARY KEY,
    sku         text NOT NULL UNIQUE,
    name        text NOT NULL,
    price       numeric(12, 2) NOT NULL CHECK (price >= 0),
    tags        text[] NOT NULL DEFAULT '{}',
    attributes  jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE customers (
    id           bigint PRIMARY KEY,
    email        text NOT NULL UNIQUE,
    name         text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    preferences  jsonb
);

CREATE TABLE orders (
    -- Chosen by the application (not a sequence), so the workload can also
    -- move an order to a new id: a primary key change.
    id           bigint PRIMARY KEY,
    customer_id  bigint NOT NULL REFERENCES customers (id),
    status       text NOT NULL DEFAULT 'new'
                 CHECK (status IN ('new', 'paid', 'shipped', 'delivered', 'cancelled')),
    placed_at    timestamptz NOT NULL DEFAULT now(),
    total        numeric(14, 2) NOT NULL DEFAULT 0
);

CREATE TABLE order_lines (
    order_id    bigint NOT NULL REFERENCES orders (id) ON UPDATE CASCADE ON DELETE CASCADE,
    line_no     integer NOT NULL,
    product_id  integer NOT NULL REFERENCES products (id),
    quantity    integer NOT NULL CHECK (quantity > 0),
    unit_price  numeric(12, 2) NOT NULL,
    PRIMARY KEY (order_id, line_no)
);

-- Free-text notes the warehouse attaches to an order; the quoted name shows
-- that pgshovel quotes identifiers everywhere (triggers, topics, target SQL).
CREATE TABLE "Shipping Notes" (
    "Order Id"   bigint NOT NULL REFERENCES orders (id) ON UPDATE CASCADE ON DELETE CASCADE,
    "Written At" timestamptz NOT NULL,
    "Note"       text NOT NULL,
    PRIMARY KEY ("Order Id", "Written At")
);

CREATE INDEX orders_customer_id ON orders (customer_id);
CREATE INDEX order_lines_product_id ON order_lines (product_id);
