"""``pgshovel-replicate [global options] replication.yml SET``: run the replication worker.

The set's configuration comes from ZooKeeper (``/<cluster>/sets/<set>``). The
first SIGINT or SIGTERM stops the worker after the current micro-batch; a
second SIGINT exits at once.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

import click

from pgshovel._cli import global_options, make_global_options, run
from pgshovel.cluster.zookeeper import ClusterStore, connect
from pgshovel.protocol import configuration_pb2
from pgshovel.replication.config import load_configuration
from pgshovel.replication.spark import spark_session
from pgshovel.replication.worker import Worker

logger = logging.getLogger(__name__)


def read_set_configuration(
    zookeeper_hosts: str, cluster: str, set_name: str
) -> configuration_pb2.ReplicationSetConfiguration:
    """The set's configuration node from ZooKeeper."""
    with connect(zookeeper_hosts) as client:
        return ClusterStore(client, cluster).read_set(set_name).value


class StopRequest:
    """Set by the first SIGINT/SIGTERM; a second SIGINT raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self) -> bool:
        return self.event.is_set()

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        logger.info("stopping after the current micro-batch (signal %d)", signum)
        self.event.set()

    def install(self) -> None:
        signal.signal(signal.SIGINT, self.handle)
        signal.signal(signal.SIGTERM, self.handle)


@click.command(name="pgshovel-replicate")
@global_options
@click.argument("configuration", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("set_name", metavar="SET")
def command(
    cluster: str,
    zookeeper_hosts: str,
    log_level: str,
    debug: bool,
    configuration: Path,
    set_name: str,
) -> None:
    """Replicate SET into the target of CONFIGURATION (replication.yml)."""
    options = make_global_options(cluster, zookeeper_hosts, log_level, debug)
    replication = load_configuration(configuration)
    set_configuration = read_set_configuration(options.zookeeper_hosts, options.cluster, set_name)
    stop = StopRequest()
    stop.install()
    spark = spark_session(replication.spark)
    try:
        Worker(options.cluster, set_name, set_configuration, replication, spark).run(stop)
    finally:
        spark.stop()
    logger.info("stopped")


def main() -> None:
    run(command)
