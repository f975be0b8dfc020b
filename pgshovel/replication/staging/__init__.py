"""The staged apply: Spark tasks reduce and stage row changes, the driver commits once.

``reduce`` folds a task's ROWS messages into each table's net effect (pure);
``postgres`` stages it in a PostgreSQL target and commits a micro-batch's
stages in one transaction. See docs/scale-out.md for the design.
"""
