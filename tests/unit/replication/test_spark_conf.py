"""The worker's Spark defaults: no web UI, a loopback driver where executors run here; conf wins."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize(
    "master",
    [
        "spark://127.0.0.1:7077",
        " spark://localhost:41234 ",
        "spark://127.0.1.1:7077",
        "spark://[::1]:7077",
        "spark://127.0.0.1:7077,localhost:7078",
    ],
)
def test_a_standalone_master_on_loopback_gets_a_loopback_driver(master: str) -> None:
    """Its executors run on this machine: Spark would advertise a non-loopback interface."""
    assert session_conf(SparkSettings(master=master)).items() >= LOOPBACK.items()


@pytest.mark.parametrize(
    "master",
    [
        "spark://spark-master:7077",
        "spark://10.0.0.5:7077",
        "spark://127.0.0.1:7077,10.0.0.5:7077",
        "spark://",
        "yarn",
        "k8s://https://k:6443",
        "k8s://https://127.0.0.1:6443",
    ],
)
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


def test_spark_logs_errors_only_unless_configured_or_verbose() -> None:
    quiet = session_conf(SparkSettings(master="local[2]"))
    assert quiet["spark.log.level"] == "ERROR"
    options = quiet["spark.driver.extraJavaOptions"]
    assert options.startswith("-Dlog4j2.configurationFile=file:")
    properties = Path(options.split("file:", 1)[1])
    assert properties.is_file() and "rootLogger.level = error" in properties.read_text()
    verbose = session_conf(SparkSettings(master="local[2]"), verbose=True)
    assert verbose["spark.log.level"] == "WARN" and "spark.driver.extraJavaOptions" not in verbose
    mine = SparkSettings(
        master="local[2]",
        conf={"spark.log.level": "INFO", "spark.driver.extraJavaOptions": "-Dmine=1"},
    )
    configured = session_conf(mine)
    assert configured["spark.log.level"] == "INFO"
    assert configured["spark.driver.extraJavaOptions"] == "-Dmine=1"
