"""A replication set's stream as a Spark source: ``spark.readStream.format("pgshovel")``.

``register(spark)`` registers the ``pgshovel`` Python Data Source
(``pgshovel.spark_source.source``) with a SparkSession; then
``spark.readStream.format("pgshovel").option("kafka.bootstrap.servers", ...)
.option("topic", "<cluster>.<set>").load()`` yields one row per mutation
(``pgshovel.spark_source.records``), every micro-batch made of whole source
transactions, and ``spark.read`` the same for a bounded range. Needs pyspark
(the ``spark`` extra); the modules of offsets, options and records do not.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Make ``format("pgshovel")`` available to ``spark`` (a SparkSession)."""
    from pgshovel.spark_source.source import PgshovelDataSource

    spark.dataSource.register(PgshovelDataSource)
