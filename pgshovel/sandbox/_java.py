"""Finding what the two JVM services need: a ``java``, ZooKeeper's jars, Kafka's jars.

``java`` comes from ``$JAVA_HOME/bin`` or ``PATH``. ZooKeeper's jars from
``$PGSHOVEL_ZOOKEEPER_JARS`` or Debian's ``/usr/share/java``. Kafka's from
``$KAFKA_HOME/libs`` when ``KAFKA_HOME`` is set, else the project's
``.deps/kafka/libs`` that ``make kafka`` unpacks.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pgshovel.errors import SandboxError
from pgshovel.sandbox._render import ZOOKEEPER_JARS, ZOOKEEPER_REQUIRED_JARS

DEBIAN_JARS = Path("/usr/share/java")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise SandboxError(
            "no 'java' on PATH and JAVA_HOME is not set: install openjdk-17-jre-headless "
            "(make setup)"
        )
    return found


def zookeeper_classpath() -> list[Path]:
    directory = Path(os.environ.get("PGSHOVEL_ZOOKEEPER_JARS", str(DEBIAN_JARS)))
    missing = sorted(name for name in ZOOKEEPER_REQUIRED_JARS if not (directory / name).exists())
    if missing:
        raise SandboxError(
            f"zookeeper jars {missing!r} not found in {str(directory)!r}: install the Debian "
            "packages zookeeper and libslf4j-java (make setup) or set PGSHOVEL_ZOOKEEPER_JARS"
        )
    return [directory / name for name in ZOOKEEPER_JARS if (directory / name).exists()]


def kafka_libs() -> Path:
    kafka_home = os.environ.get("KAFKA_HOME")
    candidates = (
        [Path(kafka_home) / "libs"]
        if kafka_home
        else [PROJECT_ROOT / ".deps" / "kafka" / "libs", Path.cwd() / ".deps" / "kafka" / "libs"]
    )
    for candidate in candidates:
        if any(candidate.glob("kafka_*.jar")):
            return candidate.resolve()
    where = ", ".join(repr(str(candidate)) for candidate in candidates)
    raise SandboxError(
        f"no kafka broker jars (kafka_*.jar) in {where}: run 'make kafka' "
        "or set KAFKA_HOME to a Kafka installation"
    )
