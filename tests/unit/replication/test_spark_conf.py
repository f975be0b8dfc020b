"""The worker's Spark defaults: no web UI, a loopback driver with a local master; conf wins."""

from __future__ import annotations

import pytest

from pgshovel.replication.config import SparkSettings
from pgshovel.replication.spark import session_conf

LOOPBACK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


@pytest.mark.parametrize(
    "master", ["local", "local[*]", "local[4]", "local[2,3]", "local-cluster[2,1,1024]"]
)
def test_a_local_master_gets_no_ui_and_a_loopback_driver(master: str) -> None:
    conf = session_conf(SparkSettings(master=master))
    assert conf["spark.ui.enabled"] == "false"
    assert conf.items() >= LOOPBACK.items()


@pytest.mark.parametrize("master", ["spark://spark-master:7077", "yarn", "k8s://https://k:6443"])
def test_a_cluster_master_keeps_sparks_driver_address(master: str) -> None:
    conf = session_conf(SparkSettings(master=master))
    assert conf["spark.ui.enabled"] == "false"
    assert not LOOPBACK.keys() & conf.keys()


def test_configuration_wins() -> None:
    conf = session_conf(
        SparkSettings(
            master="local[2]",
            conf={
                "spark.ui.enabled": "true",
                "spark.driver.host": "10.1.2.3",
                "spark.sql.shuffle.partitions": "3",
            },
        )
    )
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.driver.host"] == "10.1.2.3"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.sql.shuffle.partitions"] == "3"
