"""``pgshovel-replicate [global options] replication.yml SET``: run the replication worker.

The set's configuration comes from ZooKeeper (``/<cluster>/sets/<set>``). The
first SIGINT or SIGTERM stops the worker after the current micro-batch, also
when it is sent to the whole process group (Ctrl-C, systemd: Spark's JVM
ignores both, see ``pgshovel.replication.spark``); a second SIGINT exits at
once (see ``pgshovel._signals``). The process ends without the interpreter's
teardown once the worker stopped (``_cli.run_and_leave``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pgshovel._cli import GlobalOptions, process_command, run_and_leave
from pgshovel._signals import StopRequest
from pgshovel.cluster.zookeeper import ClusterStore, connect
from pgshovel.metrics import serve
from pgshovel.protocol import configuration_pb2
from pgshovel.replication.config import load_configuration
from pgshovel.replication.spark import require_spark, spark_session, stop_session
from pgshovel.replication.targets import copy_name
from pgshovel.replication.worker import Worker

logger = logging.getLogger(__name__)


def read_set_configuration(
    zookeeper_hosts: str, cluster: str, set_name: str
) -> configuration_pb2.ReplicationSetConfiguration:
    """The set's configuration node from ZooKeeper."""
    with connect(zookeeper_hosts) as client:
        return ClusterStore(client, cluster).read_set(set_name).value


@process_command("pgshovel-replicate")
def command(options: GlobalOptions, configuration: Path, set_name: str) -> None:
    """Replicate SET into the target of CONFIGURATION (replication.yml)."""
    require_spark()
    replication = load_configuration(configuration)
    set_configuration = read_set_configuration(options.zookeeper_hosts, options.cluster, set_name)
    stop = StopRequest()
    stop.install()
    endpoint = None
    logger.info("starting Spark (master %s)…", replication.spark.master)
    began = time.monotonic()
    spark = spark_session(replication.spark, verbose=options.verbose)
    # PySpark's SparkContext installs its own SIGINT handler (cancel every job, raise
    # KeyboardInterrupt: exit 130 at once); the worker's goes back, so that Ctrl-C, too,
    # stops it after the micro-batch in progress.
    stop.install()
    logger.info("Spark ready in %.1fs", time.monotonic() - began)
    try:
        worker = Worker(
            options.cluster,
            set_name,
            set_configuration,
            replication,
            spark,
            zookeeper_hosts=options.zookeeper_hosts,
        )
        if replication.metrics_port is not None:
            endpoint = serve(
                "pgshovel_worker",
                (options.cluster, set_name),
                worker.metrics.series(),
                replication.metrics_host,
                replication.metrics_port,
                constant={"target": copy_name(replication.target)},
                readiness=worker.metrics.readiness,
            )
        worker.run(stop)
    finally:
        if endpoint is not None:
            endpoint.close()
        stop_session(spark)
    logger.info("stopped")


def main() -> None:
    # Leaves without the interpreter's teardown, which delta-rs's and Arrow's native
    # threads sometimes abort after a clean stop (status 134; see ``_cli.leave``).
    run_and_leave(command)
