"""The worker's SparkSession really starts with its defaults (read back from a live session).

Each session starts in a child interpreter: Spark reuses a running session
(this run's shared one), whose static settings could not change. With the
sandbox's standalone cluster, the session's tasks run on both workers' executors
in this virtualenv's Python.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pgshovel.sandbox import SparkCluster

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
CHILD = """
import json, sys
from pgshovel.replication.config import SparkSettings
from pgshovel.replication.spark import spark_session
session = spark_session(SparkSettings.model_validate_json(sys.argv[1]))
conf = session.sparkContext.getConf()
try:
    print(json.dumps({
        "ui_url": session.sparkContext.uiWebUrl,
        **{key: conf.get(key, None) for key in (
            "spark.ui.enabled", "spark.driver.host", "spark.driver.bindAddress",
        )},
    }))
finally:
    session.stop()
"""


# Waits for both executors, then runs a task per core and says where each ran.
ON_THE_CLUSTER = """
import json, sys
from pgshovel.replication.config import SparkSettings
from pgshovel.replication.spark import spark_session
session = spark_session(SparkSettings.model_validate_json(sys.argv[1]))
context = session.sparkContext
conf = context.getConf()

def where(_rows):
    import sys
    import pgshovel.replication.loaders  # the executors run pgshovel's code
    yield sys.executable

try:
    executors = [
        info.host() for info in context._jsc.sc().statusTracker().getExecutorInfos()
    ]
    ran = context.parallelize(range(4), 4).mapPartitions(where).collect()
    print(json.dumps({
        "executors": len(executors) - 1,
        "pythons": sorted(set(ran)),
        "tasks": len(ran),
        **{key: conf.get(key, None) for key in ("spark.driver.host", "spark.driver.bindAddress")},
    }))
finally:
    session.stop()
"""


def started_with(
    settings: dict[str, Any], child: str = CHILD, timeout: float = 180
) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", child, json.dumps(settings)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout.splitlines()[-1]))


def test_default_session_has_no_ui_and_a_loopback_driver() -> None:
    conf = started_with({"master": "local[1]"})
    assert conf == {
        "ui_url": None,
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def test_configured_values_win() -> None:
    conf = started_with(
        {
            "master": "local[1]",
            "conf": {
                "spark.ui.enabled": "true",
                "spark.ui.port": "0",
                "spark.driver.host": "localhost",
            },
        }
    )
    assert conf["spark.ui.enabled"] == "true" and conf["ui_url"] is not None
    assert conf["spark.driver.host"] == "localhost"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"


def test_a_loopback_standalone_master_runs_tasks_on_its_workers_in_this_python(
    spark_cluster: SparkCluster,
) -> None:
    report = started_with(
        {
            "master": spark_cluster.master_url,
            "conf": {
                # Start the job only once an executor runs on every worker.
                "spark.cores.max": "2",
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s",
            },
        },
        ON_THE_CLUSTER,
        timeout=600,  # two executor JVMs and their Pythons start: slow on a loaded machine
    )
    assert report == {
        "executors": 2,
        "pythons": [sys.executable],
        "tasks": 4,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
