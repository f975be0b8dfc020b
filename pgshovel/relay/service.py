"""The relay process: configuration, ZooKeeper session, election, signals, the batch loop.

Lifecycle: connect to ZooKeeper, read the set (it must exist), watch it
(``set update`` changes the version stamped on Begin; ``set drop`` ends the
relay cleanly), then alternate between standing by and leading until a signal
arrives. The first SIGINT/SIGTERM finishes or abandons the current batch and
exits 0; a second SIGINT exits at once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from pgshovel import components
from pgshovel.abc import StreamWriter
from pgshovel.admin.database import read_node_id
from pgshovel.cluster import names
from pgshovel.cluster.sets import read_set
from pgshovel.cluster.versions import set_version
from pgshovel.errors import ConfigurationError, DatabaseError, PgshovelError
from pgshovel.protocol import configuration_pb2
from pgshovel.relay.config import RelayConfiguration
from pgshovel.relay.election import Leadership
from pgshovel.relay.events import EventDecoder
from pgshovel.relay.metrics import MetricsServer, RelayMetrics
from pgshovel.relay.queue import PgqQueue
from pgshovel.relay.relay import BatchPublisher, Pacer, SetState, lead, new_identifier

log = logging.getLogger(__name__)


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
        self.stop = threading.Event()
        self.metrics = RelayMetrics()
        self.identifier = new_identifier()
        self._interrupts = 0

    # -- signals -------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._interrupts += 1
        if self._interrupts > 1 and signum == signal.SIGINT:
            log.warning("second interrupt: exiting at once")
            os._exit(130)
        log.info("signal %d: stopping after the current batch", signum)
        self.stop.set()

    # -- the process ---------------------------------------------------------

    def run(self) -> None:
        writer: StreamWriter = components.build(self.configuration.writer, "writer", StreamWriter)
        bind = getattr(writer, "bind", None)
        if callable(bind):
            bind(f"{self.cluster}.{self.set_name}")
        zookeeper = KazooClient(hosts=self.zookeeper_hosts, timeout=10.0)
        try:
            zookeeper.start(timeout=15)
        except KazooTimeoutError as error:
            raise PgshovelError(
                f"cannot reach zookeeper at {self.zookeeper_hosts!r} within 15s"
            ) from error
        server = None
        try:
            configuration, state = self._watch_set(zookeeper)
            if self.configuration.metrics_port is not None:
                server = MetricsServer(
                    self.metrics, self.configuration.metrics_host, self.configuration.metrics_port
                )
            self._serve(zookeeper, writer, configuration, state)
        finally:
            if server is not None:
                server.close()
            writer.close()
            zookeeper.stop()
            zookeeper.close()

    def _watch_set(
        self, zookeeper: KazooClient
    ) -> tuple[configuration_pb2.ReplicationSetConfiguration, SetState]:
        path = names.set_path(self.cluster, self.set_name)
        try:
            configuration = read_set(zookeeper, self.cluster, self.set_name)
        except NoNodeError as error:
            raise ConfigurationError(
                f"set {self.set_name!r} does not exist in cluster {self.cluster!r}; "
                "create it with pgshovel-admin set create"
            ) from error
        state = SetState(version=set_version(configuration))

        def on_change(data: bytes | None, _stat: Any) -> bool:
            if data is None:
                if state.exists:
                    log.warning("set %r was dropped: stopping", self.set_name)
                state.exists = False
                return False
            updated = configuration_pb2.ReplicationSetConfiguration.FromString(data)
            version = set_version(updated)
            if version != state.version:
                log.info("set %r changed: version %s -> %s", self.set_name, state.version, version)
                state.version = version
            return True

        zookeeper.DataWatch(path, on_change)
        return configuration, state

    def _serve(
        self,
        zookeeper: KazooClient,
        writer: StreamWriter,
        configuration: configuration_pb2.ReplicationSetConfiguration,
        state: SetState,
    ) -> None:
        settings = self.configuration
        leadership = Leadership(
            zookeeper, names.relay_path(self.cluster, self.set_name), self.identifier
        )
        queue_name = names.queue_name(self.cluster, self.set_name)
        while not self.stop.is_set() and state.exists:
            epoch = leadership.acquire(self.stop)
            if epoch is None:
                break
            self.metrics.epoch, self.metrics.leader = epoch, True
            queue = PgqQueue(configuration.database.dsn, queue_name, settings.fetch_size)
            try:
                queue.check()
                queue.configure_ticker(settings.tick_interval, settings.batch_max_events)
                node = read_node_id(queue.connection, self.cluster)
                queue.connection.commit()
                decoder = EventDecoder(queue.connection)
                publisher = BatchPublisher(
                    queue, writer, decoder, node, state, self.metrics, epoch, leadership.lost
                )
                lead(
                    publisher,
                    Pacer(queue, settings.tick_interval, self.metrics),
                    self.stop,
                    leadership.lost,
                    settings.poll_interval,
                    settings.on_error,
                    settings.retry_interval,
                )
            except DatabaseError as error:
                if settings.on_error == "exit":
                    raise
                log.error(
                    "source database failed (on_error: log; reconnecting in %.1fs): %s",
                    settings.retry_interval,
                    error,
                )
                self.stop.wait(settings.retry_interval)
            finally:
                self.metrics.leader = False
                queue.close()
                leadership.release()
            if leadership.lost.is_set() and not self.stop.is_set():
                log.warning("lost leadership; rejoining the election")
                self.stop.wait(1.0)
        if not state.exists:
            log.info("set %r no longer exists: relay exits", self.set_name)
