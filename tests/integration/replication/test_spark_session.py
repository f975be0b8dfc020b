"""The worker's SparkSession really starts with its defaults (read back from a live session).

Each session starts in a child interpreter: Spark reuses a running session
(this run's shared one), whose static settings could not change.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


def started_with(settings: dict[str, Any]) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(settings)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
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
