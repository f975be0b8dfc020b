"""Start the worker's SparkSession from the ``spark:`` settings, with Spark's logging quiet."""

from __future__ import annotations

from typing import Any

from pgshovel.replication.config import SparkSettings


def spark_session(settings: SparkSettings) -> Any:
    """A SparkSession for ``settings`` (an existing one is reused, as Spark does)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in settings.conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
