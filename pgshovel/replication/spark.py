"""Start the worker's SparkSession from the ``spark:`` settings, with Spark's logging quiet.

PySpark (with pyarrow and pandas) is the optional ``spark`` extra: nothing is
imported from it until the worker starts, and :func:`require_spark` turns its
absence into one line saying what to install.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from pgshovel.errors import ConfigurationError
from pgshovel.replication.config import SparkSettings

#: What ``pip install 'pgshovel[spark]'`` adds, by import name.
SPARK_MODULES = ("pyspark", "pyarrow", "pandas")


def require_spark() -> None:
    """Raise a ``ConfigurationError`` naming the ``spark`` extra when a module of it is missing."""
    missing = [name for name in SPARK_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(
            f"pgshovel-replicate needs {', '.join(missing)}, not installed in "
            f"{sys.prefix}: install the worker with pip install 'pgshovel[spark]'"
        )


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
