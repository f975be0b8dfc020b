"""Start the worker's SparkSession from the ``spark:`` settings, with Spark's logging quiet.

Unless ``spark.conf`` sets them, the worker runs without Spark's web UI (no
one watches a worker's job pages, and the UI would listen on every interface),
and with a local master (``local``, ``local[N]``, ``local-cluster[...]``) or a
standalone master on a loopback address (``spark://127.0.0.1:7077``,
``spark://localhost:7077``, ``spark://[::1]:7077``; every host of an HA list)
the driver binds and advertises 127.0.0.1 (``spark.driver.bindAddress``,
``spark.driver.host``): the executors of such a master run on this machine, and
Spark's default would advertise the first non-loopback interface. With any other
master the executors must reach the driver, so Spark's own defaults stay.

Spark logs errors only (``spark.log.level`` ERROR, and a log4j2 configuration
of pgshovel's for the driver's startup, ``log4j2-quiet.properties``) unless
``spark.conf`` sets ``spark.log.level`` or ``spark.driver.extraJavaOptions``;
``verbose`` (``--verbose``) shows Spark's warnings and its startup lines.

Spark's JVM is started ignoring SIGTERM, as PySpark already starts it ignoring
SIGINT: a stop signal sent to the worker's whole process group (Ctrl-C,
systemd's default kill mode) reaches the driver, which stops after its
micro-batch and then stops Spark; the JVM would otherwise die at once and take
the SparkContext with it. The JVM still ends with the driver whatever happens
to it (it exits when its standard input, a pipe from the driver, closes).

PySpark (with pyarrow and pandas) is the optional ``spark`` extra: nothing is
imported from it until the worker starts, and :func:`require_spark` turns its
absence into one line saying what to install.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pgshovel.errors import ConfigurationError
from pgshovel.replication.config import SparkSettings

logger = logging.getLogger(__name__)

#: Applied unless ``spark.conf`` sets them.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
#: Also applied with a master whose executors run on this machine, unless ``spark.conf`` sets them.
LOCAL_DRIVER_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
LOCAL_MASTERS = re.compile(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]")
STANDALONE_PREFIX = "spark://"

#: What ``pip install 'pgshovel[spark]'`` adds, by import name.
SPARK_MODULES = ("pyspark", "pyarrow", "pandas")


def require_spark() -> None:
    """Raise a ``ConfigurationError`` naming the ``spark`` extra when a module of it is missing."""
    missing = [name for name in SPARK_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(
            f"pgshovel-replicate needs {', '.join(missing)}, not installed in "
            f"{sys.prefix}: install the worker with pip install 'pgshovel[spark]'"
        )


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def runs_on_this_machine(master: str) -> bool:
    """Whether ``master`` keeps every executor on this machine: a local master, or a
    standalone master (``spark://host:port[,host:port...]``) whose hosts are all loopback."""
    master = master.strip()
    if LOCAL_MASTERS.fullmatch(master):
        return True
    if not master.startswith(STANDALONE_PREFIX):
        return False
    hosts = [urlsplit("//" + part).hostname for part in master[len(STANDALONE_PREFIX) :].split(",")]
    return all(host is not None and is_loopback_host(host) for host in hosts)


#: Spark's logging when neither ``spark.conf`` nor ``--verbose`` says otherwise.
QUIET_LOG_LEVEL = "ERROR"
QUIET_LOG4J2 = Path(__file__).with_name("log4j2-quiet.properties")


def session_conf(settings: SparkSettings, verbose: bool = False) -> dict[str, str]:
    """The Spark configuration the worker starts with: pgshovel's defaults, then ``spark.conf``."""
    conf = dict(DEFAULT_CONF)
    if runs_on_this_machine(settings.master):
        conf.update(LOCAL_DRIVER_CONF)
    if verbose:
        conf["spark.log.level"] = "WARN"
    else:
        conf["spark.log.level"] = QUIET_LOG_LEVEL
        conf["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile={QUIET_LOG4J2.resolve().as_uri()}"
        )
    conf.update(settings.conf)
    return conf


def spark_session(settings: SparkSettings, verbose: bool = False) -> Any:
    """A SparkSession for ``settings`` (an existing one is reused, as Spark does).

    Task processes use ``$PYSPARK_PYTHON``, by default the running interpreter;
    set it for a cluster whose executors have pgshovel installed elsewhere.
    """
    from pyspark.sql import SparkSession

    # Tasks run pgshovel code: by default in this very interpreter (and its virtualenv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in session_conf(settings, verbose).items():
        builder = builder.config(key, value)
    with _jvm_ignoring_sigterm():
        return builder.getOrCreate()


@contextlib.contextmanager
def _jvm_ignoring_sigterm() -> Iterator[None]:
    """Inside, the JVM PySpark launches starts with SIGTERM ignored (see the module doc).

    PySpark takes ``preexec_fn`` for itself (to ignore SIGINT) and offers no other
    way to set a signal's disposition in the child, so its ``Popen`` is wrapped for
    the duration: a disposition set in the parent instead would lose a SIGTERM
    that arrives meanwhile.
    """
    from pyspark import java_gateway

    namespace = vars(java_gateway)  # the module's own globals: what launch_gateway calls
    launch: Callable[..., Any] = namespace["Popen"]

    def popen(*args: Any, **kwargs: Any) -> Any:
        before = kwargs.get("preexec_fn")

        def preexec() -> None:
            if before is not None:
                before()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return launch(*args, **kwargs)

    namespace["Popen"] = popen
    try:
        yield
    finally:
        namespace["Popen"] = launch


def stop_session(session: Any) -> None:
    """Stop Spark; a JVM that is gone already (killed) is a warning, not a traceback."""
    try:
        session.stop()
    except Exception as error:  # py4j's errors and the OS's: the JVM is gone either way
        logger.warning(
            "spark had stopped already (%s: %s): nothing left to stop",
            type(error).__name__,
            str(error).strip().splitlines()[0] if str(error).strip() else "no detail",
        )
