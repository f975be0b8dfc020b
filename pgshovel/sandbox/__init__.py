"""The local stack for demos and tests: PostgreSQL 15 with PgQ, ZooKeeper 3.8, Kafka 0.9.0.1.

``start(state_dir)`` runs the three servers as detached child processes on free
127.0.0.1 ports, waits until each really answers, and records how to reach them
in ``<state_dir>/sandbox.json`` (a :class:`SandboxConnection`); ``stop`` ends them
by PID (``terminate`` does so from a record held in memory) and ``load`` reads
the record back; ``status`` tells which still run; ``data`` where the data
is and how large, ``discard_data`` deletes it but keeps the logs;
``remember`` records a directory as the sandbox ``pgshovel-sandbox`` commands
run in the current directory (or below it) use (see
:mod:`pgshovel.sandbox._locate`); ``start_server`` adds a physical
standby of it (or a separate primary to fail over, see
:mod:`pgshovel.sandbox._servers`); ``start_spark`` runs a Spark standalone
cluster beside it from the pyspark package's jars (``stop_spark``,
``kill_spark_worker``, ``load_spark``, ``terminate_spark``; see
:mod:`pgshovel.sandbox._spark`); ``create_topic`` creates a partitioned or
compacted topic as the 0.9 broker's operator has to. Logs land in ``postgres.log``,
``zookeeper.log`` and ``kafka.log`` in the state directory. Kafka's jars come from
``$KAFKA_HOME/libs`` when ``KAFKA_HOME`` is set, else from the project's
``.deps/kafka/libs`` (``make kafka``); ZooKeeper's from Debian's
``/usr/share/java`` (``$PGSHOVEL_ZOOKEEPER_JARS``); PostgreSQL's binaries from
``/usr/lib/postgresql/15/bin`` (``$PGSHOVEL_POSTGRES_BINDIR``). As root the
database server runs as the ``postgres`` user, and its data directory moves to
that user's home when the state directory is out of its reach. The servers are
tuned for speed, not durability (``fsync=off``, ``synchronous_commit=off``).
"""

from pgshovel.sandbox._children import ChildProcess
from pgshovel.sandbox._connection import SandboxConnection
from pgshovel.sandbox._lifecycle import (
    DataPlace,
    ServiceStatus,
    data,
    discard_data,
    start,
    status,
    stop,
    terminate,
)
from pgshovel.sandbox._locate import remember
from pgshovel.sandbox._servers import Server, start_server, stop_server
from pgshovel.sandbox._spark import kill_worker as kill_spark_worker
from pgshovel.sandbox._spark import load as load_spark
from pgshovel.sandbox._spark import start as start_spark
from pgshovel.sandbox._spark import stop as stop_spark
from pgshovel.sandbox._spark import terminate as terminate_spark
from pgshovel.sandbox._spark_plan import SparkCluster, SparkProcess
from pgshovel.sandbox._startup import restart_postgres, start_kafka, stop_kafka
from pgshovel.sandbox._state import load
from pgshovel.sandbox._topics import create_topic

__all__ = [
    "ChildProcess",
    "DataPlace",
    "SandboxConnection",
    "Server",
    "ServiceStatus",
    "SparkCluster",
    "SparkProcess",
    "create_topic",
    "data",
    "discard_data",
    "kill_spark_worker",
    "load",
    "load_spark",
    "remember",
    "restart_postgres",
    "start",
    "start_kafka",
    "start_server",
    "start_spark",
    "status",
    "stop",
    "stop_kafka",
    "stop_server",
    "stop_spark",
    "terminate",
    "terminate_spark",
]
