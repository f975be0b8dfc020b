"""Replication targets: PostgreSQL (``postgresql:PostgresTarget``), Parquet (``parquet``)."""
