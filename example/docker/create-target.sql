-- Runs once, when the postgres container initializes its data directory:
-- the replica's database (the worker creates its tables).
CREATE DATABASE replica;
