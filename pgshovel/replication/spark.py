"""Start the worker's SparkSession from the ``spark:`` settings, with Spark's logging quiet."""

from __future__ import annotations

import os
import sys
from typing import Any

from pgshovel.replication.config import SparkSettings


def spark_session(settings: SparkSettings) -> Any:
    """A SparkSession for ``settings`` (an existing one is reused, as Spark does).

    Task processes use ``$PYSPARK_PYTHON``, by default the running interpreter;
    set it for a cluster whose executors have pgshovel installed elsewhere.
    """
    from pyspark.sql import SparkSession

    # Tasks run pgshovel code: by default in this very interpreter (and its virtualenv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in settings.conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
