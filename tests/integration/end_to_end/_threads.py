"""Writer threads for end-to-end tests: each test says what one transaction writes.

``WriterThreads`` runs ``write(cursor, rng)`` then COMMIT in a loop on every
thread until ``stop()``, counts the commits, can be paused, and reports the
first unexpected error from ``stop()``. Errors listed in ``rolled_back`` only
roll the transaction back (a DDL lock or a rename raced it); with
``reconnect``, a lost connection is opened again (a server restart).
"""

from __future__ import annotations

import random
import threading
from typing import Any

import psycopg2


class WriterThreads:
    """Threads writing through ``write`` until stopped."""

    #: errors that only roll the transaction back
    rolled_back: tuple[type[BaseException], ...] = ()
    #: open the connection again when it is lost, instead of failing
    reconnect = False
    #: seconds between transactions of one thread
    pause = 0.005

    def __init__(self, dsn: str, threads: int = 2) -> None:
        self.dsn = dsn
        self.committed = 0
        self.reconnects = 0
        self.errors: list[BaseException] = []
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(threads)]

    def write(self, cursor: Any, rng: random.Random) -> None:
        raise NotImplementedError

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        if self.errors:
            raise self.errors[0]

    def _run(self, index: int) -> None:
        rng = random.Random(index)
        connection: Any = None
        try:
            while not self._stop.is_set():
                if self.paused.is_set():
                    self._stop.wait(0.05)
                    continue
                try:
                    # Inside the try: while a server restarts, connecting fails too
                    # ("the database system is starting up") and is retried the same way.
                    if connection is None:
                        connection = psycopg2.connect(self.dsn, connect_timeout=5)
                    with connection.cursor() as cursor:
                        self.write(cursor, rng)
                    connection.commit()
                    with self._lock:
                        self.committed += 1
                except self.rolled_back:
                    connection.rollback()
                except (psycopg2.OperationalError, psycopg2.InterfaceError):
                    if not self.reconnect:
                        raise
                    with self._lock:
                        self.reconnects += 1
                    if connection is not None:
                        connection.close()
                    connection = None
                    self._stop.wait(0.5)
                self._stop.wait(self.pause)
        except BaseException as error:  # pragma: no cover - reported by stop()
            self.errors.append(error)
        finally:
            if connection is not None:
                connection.close()
