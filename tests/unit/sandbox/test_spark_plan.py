"""The sandbox's Spark cluster as data: where Spark is, the daemons' commands and environment."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pgshovel.errors import SandboxError
from pgshovel.sandbox import SparkCluster, SparkProcess
from pgshovel.sandbox._spark import _spark_home
from pgshovel.sandbox._spark_plan import (
    DAEMON_PROPERTIES,
    alive_worker_ports,
    check_memory,
    daemon_environment,
    daemon_of_pid_file,
    master_command,
    master_url,
    properties_path,
    service,
    spark_home,
    work_directory,
    worker_command,
    worker_names,
)

STATE = Path("/s/state dir")


def fake_spark(directory: Path) -> Path:
    (directory / "bin").mkdir(parents=True)
    (directory / "bin" / "spark-class").write_text("#!/bin/sh\n")
    (directory / "jars").mkdir()
    return directory


def test_spark_home_is_spark_home_else_the_pyspark_package(tmp_path: Path) -> None:
    installed = fake_spark(tmp_path / "site-packages" / "pyspark")
    own = fake_spark(tmp_path / "spark-4")
    assert spark_home({}, installed) == installed
    assert spark_home({"SPARK_HOME": str(own)}, installed) == own


def test_the_installed_pyspark_carries_spark_class_and_jars() -> None:
    home = _spark_home()
    assert (home / "bin" / "spark-class").is_file()
    assert any((home / "jars").glob("spark-core_*.jar"))


def test_no_spark_is_one_line_naming_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"pip install 'pgshovel\[spark\]'"):
        spark_home({}, None)
    with pytest.raises(SandboxError, match=r"SPARK_HOME .* has no bin/spark-class"):
        spark_home({"SPARK_HOME": str(tmp_path)}, None)


@pytest.mark.parametrize(("given", "expected"), [("1g", "1g"), (" 512M ", "512m"), ("2G", "2g")])
def test_worker_memory(given: str, expected: str) -> None:
    assert check_memory(given) == expected


@pytest.mark.parametrize("given", ["", "1", "0g", "1.5g", "1gb", "-1g", "1k"])
def test_worker_memory_that_spark_would_refuse_is_an_error(given: str) -> None:
    with pytest.raises(SandboxError, match="512m or 1g"):
        check_memory(given)


def test_master_binds_loopback_with_its_own_properties_file() -> None:
    home = Path("/py/pyspark")
    command = master_command(home, 7077, 8080, properties_path(STATE, "master"))
    assert command == [
        "/py/pyspark/bin/spark-class",
        "org.apache.spark.deploy.master.Master",
        "--host",
        "127.0.0.1",
        "--port",
        "7077",
        "--webui-port",
        "8080",
        "--properties-file",
        "/s/state dir/spark/master.properties",
    ]


def test_worker_offers_its_cores_and_memory_to_the_master() -> None:
    command = worker_command(
        Path("/py/pyspark"),
        master_url(7077),
        40001,
        2,
        "1g",
        work_directory(STATE, "worker-1"),
        properties_path(STATE, "worker-1"),
    )
    assert command[:2] == ["/py/pyspark/bin/spark-class", "org.apache.spark.deploy.worker.Worker"]
    options = dict(zip(command[2:-1:2], command[3:-1:2], strict=True))
    assert options == {
        "--host": "127.0.0.1",
        "--port": "40001",
        "--webui-port": "0",
        "--cores": "2",
        "--memory": "1g",
        "--work-dir": "/s/state dir/spark/worker-1",
        "--properties-file": "/s/state dir/spark/worker-1.properties",
    }
    assert command[-1] == "spark://127.0.0.1:7077"


def test_daemons_bind_loopback_run_executors_in_this_python_and_ignore_host_conf() -> None:
    environment = daemon_environment(
        {"PATH": "/bin", "SPARK_LOCAL_IP": "10.0.0.1"},
        Path("/py/pyspark"),
        Path("/s/spark/conf"),
        "/venv/bin/python",
    )
    assert environment["PATH"] == "/bin"
    assert environment["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert environment["SPARK_HOME"] == "/py/pyspark"
    assert environment["SPARK_CONF_DIR"] == "/s/spark/conf"
    assert environment["PYSPARK_PYTHON"] == "/venv/bin/python"
    assert environment["SPARK_DAEMON_MEMORY"] == "256m"


def test_no_fixed_port_and_no_silent_port_change() -> None:
    assert DAEMON_PROPERTIES == {
        "spark.port.maxRetries": "0",
        "spark.master.rest.enabled": "false",
    }


def test_names() -> None:
    assert worker_names(2) == ["worker-1", "worker-2"]
    assert service("master") == "spark-master"
    assert service("worker-2") == "spark-worker-2"
    assert daemon_of_pid_file("spark-worker-12.pid") == "worker-12"
    assert daemon_of_pid_file("spark-master.pid") == "master"


MASTER_STATUS = {
    "url": "spark://127.0.0.1:7077",
    "workers": [
        {"id": "worker-a", "host": "127.0.0.1", "port": 43961, "state": "DEAD"},
        {"id": "worker-b", "host": "127.0.0.1", "port": 40585, "state": "ALIVE"},
        {"id": "worker-c", "host": "127.0.0.1", "port": 54569, "state": "ALIVE"},
    ],
    "aliveworkers": 2,
    "status": "ALIVE",
}


def test_alive_workers_are_read_from_the_masters_status_page() -> None:
    assert alive_worker_ports(MASTER_STATUS) == {40585, 54569}
    assert alive_worker_ports({"status": "STANDBY"}) == set()
    assert alive_worker_ports({"workers": [{"port": "1", "state": "ALIVE"}, 3]}) == set()


def cluster() -> SparkCluster:
    return SparkCluster(
        state_dir=str(STATE),
        master_url=master_url(7077),
        webui_port=8080,
        cores=1,
        memory="1g",
        master=SparkProcess("master", 10, 7077, "/s/spark-master.log"),
        workers={
            "worker-2": SparkProcess("worker-2", 12, 40002, "/s/spark-worker-2.log"),
            "worker-1": SparkProcess("worker-1", 11, 40001, "/s/spark-worker-1.log"),
        },
    )


def test_record_round_trip_and_processes_in_order() -> None:
    original = cluster()
    assert SparkCluster.from_json(original.to_json(), "spark.json") == original
    assert [process.name for process in original.processes()] == [
        "master",
        "worker-1",
        "worker-2",
    ]


@pytest.mark.parametrize("text", ["", "[]", '{"master_url": 1}', "{}"])
def test_a_damaged_record_is_a_sandbox_error_naming_the_remedy(text: str) -> None:
    with pytest.raises(SandboxError, match="pgshovel-sandbox spark down"):
        SparkCluster.from_json(text, "x/spark.json")


def test_a_worker_with_a_damaged_field_is_an_error() -> None:
    text = (
        dataclasses.replace(cluster(), workers={})
        .to_json()
        .replace('"workers": {}', '"workers": 3')
    )
    with pytest.raises(SandboxError):
        SparkCluster.from_json(text, "x/spark.json")
