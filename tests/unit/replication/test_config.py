"""replication.yml validation: unknown keys, bad paths and bad values name the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgshovel.errors import ConfigurationError
from pgshovel.replication.config import load_configuration
from pgshovel.replication.loaders import PostgresSnapshotLoader
from pgshovel.replication.spark import session_conf
from pgshovel.replication.staged import TASK_ROWS, stager_for
from pgshovel.replication.streams import KafkaStream
from pgshovel.replication.targets.postgresql import PostgresTarget

VALID = """
spark:
  master: local[2]
  conf: {spark.ui.enabled: false, spark.sql.shuffle.partitions: 4}
loader:
  path: pgshovel.replication.loaders:PostgresSnapshotLoader
  configuration: {ranges_per_table: 3}
stream:
  path: pgshovel.replication.streams:KafkaStream
  configuration:
    bootstrap_servers: ${TEST_KAFKA:-127.0.0.1:9092}
    properties: {api.version.request: false}
target:
  path: pgshovel.replication.targets.postgresql:PostgresTarget
  configuration: {dsn: "dbname=target password=secret"}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "replication.yml"
    path.write_text(text)
    return path


def test_valid_file_builds_every_component(tmp_path: Path) -> None:
    configuration = load_configuration(write(tmp_path, VALID))
    assert configuration.spark.master == "local[2]"
    assert configuration.spark.conf == {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
    }
    assert isinstance(configuration.loader, PostgresSnapshotLoader)
    assert configuration.loader.ranges_per_table == 3
    assert isinstance(configuration.stream, KafkaStream)
    assert configuration.stream.bootstrap_servers == "127.0.0.1:9092"
    assert configuration.stream.topic is None
    assert isinstance(configuration.target, PostgresTarget)
    assert "secret" not in repr(configuration.target)


def test_spark_defaults_to_local(tmp_path: Path) -> None:
    text = VALID.split("loader:")[1]
    assert load_configuration(write(tmp_path, "loader:" + text)).spark.master == "local[*]"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("spark:", "sparks:"), r"sparks: unknown key"),
        (("master: local[2]", "master: local[2]\n  mastr: x"), r"spark\.mastr: unknown key"),
        (
            ("ranges_per_table: 3", "ranges_per_tabel: 3"),
            r"loader\.configuration\.ranges_per_tabel: unknown key",
        ),
        (("ranges_per_table: 3", "ranges_per_table: 0"), r"ranges_per_table: must be >= 1, got 0"),
        (("loaders:PostgresSnapshotLoader", "loaders:Nope"), r"loader.path: module .* has no"),
        (
            (
                "path: pgshovel.replication.loaders:PostgresSnapshotLoader\n"
                "  configuration: {ranges_per_table: 3}",
                "path: pgshovel.replication.config:SparkSettings",
            ),
            r"loader.path: .* is not a Loader",
        ),
        (("target:\n", "targets:\n"), r"targets: unknown key"),
        (
            ("target:\n", "on_error: ignore\ntarget:\n"),
            r"on_error: expected one of \['exit', 'log'\], got 'ignore'",
        ),
        (
            ("target:\n", "stage_task_rows: 0\ntarget:\n"),
            r"stage_task_rows: must be >= 1, got 0",
        ),
    ],
)
def test_errors_name_file_and_key(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    path = write(tmp_path, VALID.replace(*change, 1))
    with pytest.raises(ConfigurationError, match=message) as raised:
        load_configuration(path)
    assert str(path) in str(raised.value)


def test_staging_tasks_are_cut_at_the_configured_size(tmp_path: Path) -> None:
    """``stage_task_rows`` reaches the stager that cuts a micro-batch into Spark tasks."""
    default = load_configuration(write(tmp_path, VALID))
    assert default.stage_task_rows == TASK_ROWS == 100_000
    configuration = load_configuration(
        write(tmp_path, VALID.replace("target:\n", "stage_task_rows: 1234\ntarget:\n", 1))
    )
    assert configuration.stage_task_rows == 1234
    assert isinstance(configuration.stream, KafkaStream)
    configuration.stream.topic = "cluster.set"  # what open() names it; nothing is connected
    stager = stager_for(object(), configuration)
    assert (stager.task_rows, stager.topic) == (1234, "cluster.set")


def test_missing_section_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.split("target:")[0])
    with pytest.raises(ConfigurationError, match=r"replication\.yml: missing 'target'"):
        load_configuration(path)


def test_example_file_is_valid() -> None:
    example = Path(__file__).parents[3] / "example" / "replication.yml"
    configuration = load_configuration(example)
    assert isinstance(configuration.target, PostgresTarget)
    # No web UI: the worker's default, which the example leaves alone.
    assert "spark.ui.enabled" not in configuration.spark.conf
    assert session_conf(configuration.spark)["spark.ui.enabled"] == "false"


def test_on_error_defaults_to_exit_and_accepts_log(tmp_path: Path) -> None:
    assert load_configuration(write(tmp_path, VALID)).on_error == "exit"
    configuration = load_configuration(write(tmp_path, VALID + "on_error: log\n"))
    assert (configuration.on_error, configuration.retry_interval) == ("log", 2.0)
