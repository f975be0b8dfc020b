"""The relay process: configuration, ZooKeeper session, election, the error policy, the batch loop.

Lifecycle: connect to ZooKeeper, read the set (it must exist), watch it
(``set update`` changes the version stamped on Begin; ``set drop`` ends the
relay cleanly), then alternate between standing by and leading until a signal
arrives. While leading, every failure goes to the error policy
(``pgshovel.policy``): a lost source connection or an unavailable broker is
retried with backoff *without giving up the leadership* (no epoch is burned),
a data error follows ``on_error``, anything else ends the relay. Losing the
ZooKeeper session ends the leadership; the relay then rejoins the election.
Its status node (``pgshovel.relay.status``) is written every second meanwhile.
The first SIGINT/SIGTERM finishes or abandons the current batch and exits 0; a
second SIGINT exits at once.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import uuid

from kazoo.client import KazooClient

from pgshovel._signals import StopRequest
from pgshovel.abc import SourceReader, StreamWriter
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.watch import SetWatch
from pgshovel.cluster.zookeeper import start_client
from pgshovel.errors import LeadershipLost, PgshovelError
from pgshovel.metrics import MetricsEndpoint, serve
from pgshovel.policy import ErrorPolicy
from pgshovel.relay.config import RelayConfiguration
from pgshovel.relay.election import Leadership
from pgshovel.relay.events import QueueEventDecoder
from pgshovel.relay.failover import (
    StandbyGate,
    check_stream_known,
    divergence_remedy,
    wait_primary,
)
from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.queue import BacklogGauge, PgqQueue
from pgshovel.relay.relay import BatchPublisher, Pacer, lead
from pgshovel.relay.status import RelayStatusBoard
from pgshovel.source import read_node_id, source_dsn, translating

logger = logging.getLogger(__name__)


def _succeeded(metrics: RelayMetrics, policy: ErrorPolicy) -> None:
    metrics.succeeded()
    policy.succeeded()


def new_identifier() -> str:
    """How this relay process names itself in the election."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Relay:
    """One relay process for one set."""

    def __init__(
        self,
        configuration: RelayConfiguration,
        cluster: str,
        set_name: str,
        zookeeper_hosts: str,
    ) -> None:
        names.validate_cluster_name(cluster)
        names.validate_set_name(set_name)
        self.configuration = configuration
        self.cluster = cluster
        self.set_name = set_name
        self.zookeeper_hosts = zookeeper_hosts
        self.stop_request = StopRequest()
        self.stop = self.stop_request.event
        self.metrics = RelayMetrics()
        self.identifier = new_identifier()

    def install_signal_handlers(self) -> None:
        self.stop_request.install()

    # -- the process ---------------------------------------------------------

    def run(self) -> None:
        writer = self.configuration.writer.build()
        writer.bind(names.topic_name(self.cluster, self.set_name))
        zookeeper = start_client(self.zookeeper_hosts)
        server: MetricsEndpoint | None = None
        backlog: BacklogGauge | None = None
        watch: SetWatch | None = None
        board: RelayStatusBoard | None = None
        try:
            watch = watched = SetWatch.start(zookeeper, self.cluster, self.set_name)
            board = RelayStatusBoard(
                zookeeper, self.cluster, self.set_name, self.identifier, self.metrics
            ).start()
            if self.configuration.metrics_port is not None:
                secret = self.configuration.source_connection.get_secret_value()
                backlog = BacklogGauge(
                    lambda: source_dsn(watched.current().dsn, secret),
                    names.queue_name(self.cluster, self.set_name),
                )
                self.metrics.backlog = backlog
                self.metrics.backlog_age = backlog.oldest_seconds
                server = serve(
                    "pgshovel_relay",
                    (self.cluster, self.set_name),
                    self.metrics.series(),
                    self.configuration.metrics_host,
                    self.configuration.metrics_port,
                    readiness=self.metrics.readiness,
                )
            self._serve(zookeeper, writer, watch)
        finally:
            if board is not None:
                board.close()
            if watch is not None:
                watch.close()
            if server is not None:
                server.close()
            if backlog is not None:
                backlog.close()
            writer.close()
            zookeeper.stop()
            zookeeper.close()

    def _serve(self, zookeeper: KazooClient, writer: StreamWriter, watch: SetWatch) -> None:
        settings = self.configuration
        leadership = Leadership(
            zookeeper, names.relay_path(self.cluster, self.set_name), self.identifier
        )
        policy = ErrorPolicy(
            settings.on_error,
            self.stop.wait,
            logger,
            retry_interval=settings.retry_interval,
            max_backoff=settings.max_backoff,
        )
        while not self.stop.is_set() and watch.exists:
            epoch = leadership.acquire(self.stop)
            if epoch is None:
                break
            self.metrics.epoch, self.metrics.leader = epoch, True
            try:
                self._lead(writer, watch, epoch, leadership, policy)
            finally:
                self.metrics.leader = False
                self.metrics.pending_since = None
                leadership.release()
            if leadership.lost.is_set() and not self.stop.is_set():
                logger.warning("lost leadership; rejoining the election")
                self.stop.wait(1.0)
        if not watch.exists:
            logger.info("set %r no longer exists: relay exits", self.set_name)

    def _lead(
        self,
        writer: StreamWriter,
        watch: SetWatch,
        epoch: int,
        leadership: Leadership,
        policy: ErrorPolicy,
    ) -> None:
        """Publish while leading; every failure goes through the error policy.

        Each (re)connection takes the set as it is now (``SetWatch.follow``): its
        database, and the configuration handed to a writer that reads the source
        (table topics), never a copy kept from an earlier connection."""
        settings = self.configuration
        queue_name = names.queue_name(self.cluster, self.set_name)
        gate = StandbyGate(settings.standbys)

        def interrupted() -> bool:
            """What ends every wait while leading: a stop, a lost leadership, a move."""
            return self.stop.is_set() or leadership.lost.is_set() or watch.moved.is_set()

        while not self.stop.is_set() and not leadership.lost.is_set() and watch.exists:
            current = watch.follow()
            dsn = source_dsn(current.dsn, settings.source_connection.get_secret_value())
            queue = PgqQueue(dsn, queue_name, settings.fetch_size)
            try:
                if not wait_primary(queue.connection, current.dsn, interrupted, self.stop.wait):
                    continue
                queue.check()
                queue.configure_ticker(settings.tick_interval, settings.batch_max_events)
                with translating("reading the node id"):
                    node = read_node_id(queue.connection, self.cluster)
                    queue.connection.commit()
                check_stream_known(
                    queue.connection,
                    queue_name,
                    node,
                    writer.last_committed_begin(),
                    self.set_name,
                    functools.partial(
                        divergence_remedy,
                        queue.connection,
                        self.cluster,
                        self.set_name,
                        current.dsn,
                        current.configuration,
                    ),
                )
                if isinstance(writer, SourceReader):
                    writer.attach_source(dsn, watch.current().configuration)
                logger.info(
                    "connected to database %r (set version %s)",
                    mask_dsn(current.dsn),
                    watch.version,
                )
                publisher = BatchPublisher(
                    queue,
                    writer,
                    QueueEventDecoder.for_queue(queue.connection, self.cluster, queue_name),
                    node,
                    watch,
                    self.metrics,
                    epoch,
                    leadership.lost,
                )
                lead(
                    publisher,
                    Pacer(queue, settings.tick_interval, self.metrics),
                    self.stop,
                    leadership.lost,
                    settings.poll_interval,
                    functools.partial(_succeeded, self.metrics, policy),
                    functools.partial(gate.wait, queue.connection, self.stop, interrupted),
                )
            except LeadershipLost:
                return
            except PgshovelError as error:
                self.metrics.failed(error)
                policy.failed(error)
            finally:
                queue.close()
