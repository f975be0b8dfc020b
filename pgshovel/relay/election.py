"""One active relay per set: a ZooKeeper lock, and an epoch that fences the loser.

The lock lives under ``/<cluster>/sets/<set>/relay``. After winning it, the
leader bumps that node's data: the node's new version is the epoch, written into
every message header. Versions only grow, so a relay that lost its session and
still publishes (a zombie) is recognised by readers from its older epoch.

Leadership ends as soon as the ZooKeeper connection is suspended, before the
session can expire and another relay can win: the relay stops publishing on
``SUSPENDED`` and rejoins the election afterwards.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout, NoAuthError, NoNodeError
from kazoo.recipe.lock import Lock

from pgshovel.cluster.zookeeper import access_denied
from pgshovel.errors import ConfigurationError

logger = logging.getLogger(__name__)


class Leadership:
    """Acquire, hold and give up the relay lock of one set."""

    def __init__(self, zookeeper: KazooClient, path: str, identifier: str) -> None:
        self.zookeeper = zookeeper
        self.path = path
        self.identifier = identifier
        self.lost = threading.Event()
        self._lock: Lock | None = None
        zookeeper.add_listener(self._on_state)

    def _on_state(self, state: Any) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            if self._lock is not None and not self.lost.is_set():
                logger.warning("zookeeper connection %s: giving up leadership now", state)
            self.lost.set()

    def acquire(self, stop: threading.Event, poll: float = 1.0) -> int | None:
        """Block until this relay leads (returns its epoch) or ``stop`` is set (None)."""
        lock = self.zookeeper.Lock(self.path, self.identifier)
        announced = unreachable = False
        while not stop.is_set():
            try:
                self.zookeeper.ensure_path(self.path)
                if lock.acquire(timeout=poll):
                    break
            except LockTimeout:
                pass
            except NoAuthError as error:
                # Not an outage: waiting would never end. The lock's nodes get this
                # process's ACL (pgshovel.cluster.security).
                lock.cancel()
                raise access_denied(self.zookeeper, self.path) from error
            except KazooException as error:
                # ZooKeeper is unreachable: nobody can lead; wait for it to come back.
                if not unreachable:
                    logger.warning(
                        "zookeeper unavailable (%s); waiting to join the election", error
                    )
                    unreachable = True
                stop.wait(poll)
                continue
            if not announced:
                contenders = [c for c in lock.contenders() if c != self.identifier]
                logger.info("standing by: relay %s leads", contenders[0] if contenders else "?")
                announced = True
        else:
            lock.cancel()
            return None
        self._lock = lock
        self.lost.clear()
        try:
            stat = self.zookeeper.set(self.path, self.identifier.encode())
        except NoAuthError as error:
            self.release()
            raise access_denied(self.zookeeper, self.path) from error
        except NoNodeError as error:
            self.release()
            raise ConfigurationError(
                f"relay node {self.path!r} disappeared; was the set dropped?"
            ) from error
        epoch = int(stat.version)
        logger.info("leading %s with epoch %d", self.path, epoch)
        return epoch

    def release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            lock.release()
        except Exception as error:
            logger.debug("releasing the relay lock failed: %s", error)
