"""pytest plugin: the tests' Spark drivers start a cheaper JVM (loaded with ``-p tests.fix_jvm``).

Every worker, snapshot and Spark test starts a Spark driver JVM, most of them several
times (restarts after kill -9), and a start costs about 16 CPU seconds, mostly the
optimizing JIT compiler working on Spark's start-up code and a parallel garbage
collector. ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds to the driver JVM's
options (besides ``spark.driver.extraJavaOptions``, so pgshovel's own log settings
stay), makes it the client compiler only and the serial collector: about 10 CPU
seconds per start, measured on this suite's 2-core machine, with no effect on what the
tests check (results, not speed). A ``SPARK_SUBMIT_OPTS`` already set is left as it is.
Production workers keep the JVM's defaults: long-running micro-batches gain from the
optimizing compiler.
"""

from __future__ import annotations

import os

#: what the tests' driver JVMs start with (see the module doc)
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)
