"""Configuration files and command lines of the sandbox services, rendered as pure text.

Every setting the sandbox chooses for PostgreSQL, ZooKeeper and Kafka lives here,
so the choices can be read (and unit-tested) in one place. Speed over durability:
PostgreSQL runs with ``fsync=off``/``synchronous_commit=off`` and ZooKeeper with
``forceSync=no``; a crash of the machine may lose the sandbox's data, never a
user's. PostgreSQL's durability settings go into a file its ``postgresql.conf``
includes rather than onto the command line, which ``ALTER SYSTEM`` cannot
override: the benchmarks turn durability on for a while with ``ALTER SYSTEM``
and a reload. ``wal_level=logical`` lets them run a logical decoding peer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

# Java 17 options for both JVMs. Kafka 0.9's kafka-run-class.sh passes flags that
# Java 9+ removed (-XX:+UseParNewGC, -XX:+PrintGCDateStamps, ...) and refuses to
# start; a plain small-heap serial-GC JVM runs the 0.9 broker fine.
JVM_OPTIONS: tuple[str, ...] = (
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)

ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
KAFKA_MAIN = "kafka.Kafka"
KAFKA_CHROOT = "/kafka"

# Debian's zookeeper.jar names most of its dependencies in its manifest; these are
# the ones it leaves out (a logging backend) or that are named here for clarity.
ZOOKEEPER_JARS: tuple[str, ...] = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "netty-handler.jar",
    "netty-transport.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-resolver.jar",
    "netty-codec.jar",
)
ZOOKEEPER_REQUIRED_JARS: frozenset[str] = frozenset(
    {"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar"}
)

POSTGRES_SETTINGS: dict[str, str] = {
    "listen_addresses": "127.0.0.1",
    "max_prepared_transactions": "64",
    "max_connections": "200",
    # A replication slot and pg_recvlogical: the benchmarks' logical decoding peer.
    "wal_level": "logical",
    "max_replication_slots": "10",
    "max_wal_senders": "10",
    "cluster_name": "pgshovel-sandbox",
    "log_line_prefix": "%m [%p] %q%u@%d ",
}

#: Settings ``ALTER SYSTEM`` may override (they live in :data:`POSTGRES_INCLUDED_FILE`).
POSTGRES_DURABILITY: dict[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
#: The file in the data directory that holds :data:`POSTGRES_DURABILITY`.
POSTGRES_INCLUDED_FILE = "pgshovel-sandbox.conf"
#: The line ``postgresql.conf`` gets so the server reads that file.
POSTGRES_INCLUDE_LINE = f"include_if_exists = '{POSTGRES_INCLUDED_FILE}'"


def render_postgres_conf(settings: Mapping[str, str]) -> str:
    """``postgresql.conf`` text: one ``name = 'value'`` per line, in the given order."""
    lines = ["# Written by pgshovel's sandbox at every start; ALTER SYSTEM overrides it.\n"]
    for name, value in settings.items():
        if "\n" in value or "\\" in value:
            raise ValueError(f"setting {name!r} must be one plain line, got {value!r}")
        quoted = value.replace("'", "''")
        lines.append(f"{name} = '{quoted}'\n")
    return "".join(lines)


def render_properties(settings: Mapping[str, object]) -> str:
    """Java ``.properties`` / zoo.cfg text: one ``key=value`` per line, in the given order."""
    return "".join(f"{key}={_property_value(value)}\n" for key, value in settings.items())


def zookeeper_settings(data_dir: Path, port: int) -> dict[str, object]:
    """A standalone ZooKeeper on loopback, with short ticks so tests can expire sessions fast."""
    return {
        "tickTime": 500,
        "minSessionTimeout": 1000,
        "maxSessionTimeout": 60000,
        "dataDir": data_dir,
        "clientPort": port,
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": 0,
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,srvr,stat",
        "forceSync": "no",
        "preAllocSize": 4096,
    }


def kafka_settings(log_dir: Path, port: int, zookeeper_port: int) -> dict[str, object]:
    """One Kafka 0.9 broker on loopback, under the ``/kafka`` chroot of the sandbox ZooKeeper."""
    return {
        "broker.id": 0,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.host.name": "127.0.0.1",
        "advertised.port": port,
        "zookeeper.connect": f"127.0.0.1:{zookeeper_port}{KAFKA_CHROOT}",
        "zookeeper.connection.timeout.ms": 30000,
        "log.dirs": log_dir,
        "num.partitions": 1,
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
        "log.cleaner.enable": "true",
        # The cleaner's default 128 MB buffer would take a quarter of the small heap.
        "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
        "offsets.topic.replication.factor": 1,
        # One partition: the first consumer group joins in seconds instead of
        # waiting for fifty partitions to be created.
        "offsets.topic.num.partitions": 1,
        # librdkafka 2.x asks for a 45 s session by default; 0.9 caps it at 30 s.
        "group.max.session.timeout.ms": 300000,
        "num.network.threads": 2,
        "num.io.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
    }


def kafka_log4j() -> str:
    """Broker logging to standard output, which the sandbox sends to kafka.log."""
    return render_properties(
        {
            "log4j.rootLogger": "INFO, stdout",
            "log4j.appender.stdout": "org.apache.log4j.ConsoleAppender",
            "log4j.appender.stdout.layout": "org.apache.log4j.PatternLayout",
            "log4j.appender.stdout.layout.ConversionPattern": "[%d] %p %m (%c)%n",
            "log4j.logger.kafka.request.logger": "WARN",
            "log4j.logger.state.change.logger": "WARN",
        }
    )


def zookeeper_command(java: str, jars: Sequence[Path], config: Path) -> list[str]:
    return [
        java,
        *JVM_OPTIONS,
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-cp",
        ":".join(str(jar) for jar in jars),
        ZOOKEEPER_MAIN,
        str(config),
    ]


def kafka_command(java: str, libs: Path, config: Path, log4j: Path) -> list[str]:
    return [
        java,
        *JVM_OPTIONS,
        f"-Dlog4j.configuration={log4j.as_uri()}",
        "-cp",
        f"{libs}/*",
        KAFKA_MAIN,
        str(config),
    ]


def initdb_command(bindir: Path, data_dir: Path) -> list[str]:
    return [
        str(bindir / "initdb"),
        "--pgdata",
        str(data_dir),
        "--username",
        "postgres",
        "--auth",
        "trust",
        "--encoding",
        "UTF8",
        "--locale",
        "C.UTF-8",
        "--no-sync",
        "--no-instructions",
    ]


def postgres_command(bindir: Path, data_dir: Path, socket_dir: Path, port: int) -> list[str]:
    command = [str(bindir / "postgres"), "-D", str(data_dir)]
    settings = {**POSTGRES_SETTINGS, "port": str(port), "unix_socket_directories": str(socket_dir)}
    for name, value in settings.items():
        command += ["-c", f"{name}={value}"]
    return command


def _property_value(value: object) -> str:
    text = str(value)
    if "\n" in text:
        raise ValueError(f"property value must be one line, got {text!r}")
    return text
