"""pgshovel: change data capture for PostgreSQL through PgQ, Kafka and PySpark."""

__version__ = "0.1.0"

__all__ = ["__version__"]
