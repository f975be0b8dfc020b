"""pytest plugin: the suite's slowest files run first (loaded with ``-p tests.fix_order``).

``make test`` hands whole files to two pytest-xdist workers (``--dist loadfile``) in
collection order, each worker asking for the next file when it has two tests or fewer
left. A two-minute end-to-end file started last keeps one worker busy minutes after the
other ran out of files, so the files of :data:`SLOWEST` (measured on the whole suite,
slowest first, setup included) are collected first, in that order, then every other
integration file, then the unit tests, whose thousands of short tests even out the
workers' finish. The order of the tests inside a file does not change. ``make test``
passes ``--no-loadscope-reorder``: without it xdist sorts the files by their number of
tests, most first, which puts these one- and two-test files last.
"""

from __future__ import annotations

import pytest

#: test files by their time on the whole suite (two workers, a loaded machine: 2,228 s),
#: slowest first, from 404 s (test_incremental.py) down to 62 s
SLOWEST: tuple[str, ...] = (
    "tests/integration/end_to_end/test_incremental.py",
    "tests/integration/end_to_end/test_partitioned_apply.py",
    "tests/integration/end_to_end/test_postgres_target.py",
    "tests/integration/end_to_end/test_failover.py",
    "tests/integration/relay/test_table_topics.py",
    "tests/integration/end_to_end/test_table_format_targets.py",
    "tests/integration/spark_source/test_spark_source.py",
    "tests/integration/test_bench.py",
    "tests/integration/end_to_end/test_table_time_travel.py",
    "tests/integration/test_sandbox.py",
    "tests/integration/end_to_end/test_table_history.py",
    "tests/integration/end_to_end/test_schema_changes.py",
    "tests/integration/end_to_end/test_security.py",
    "tests/integration/replication/test_crash.py",
    "tests/integration/test_demo.py",
    "tests/integration/end_to_end/test_spark_cluster.py",
    "tests/integration/replication/test_signals.py",
    "tests/integration/replication/test_tablefmt_staging.py",
    "tests/integration/replication/test_spark_session.py",
    "tests/integration/end_to_end/test_tablefmt_staged.py",
    "tests/integration/admin/test_sets.py",
    "tests/integration/end_to_end/test_failover_refusals.py",
    "tests/integration/relay/test_kafka_outage.py",
    "tests/integration/replication/test_parquet.py",
)


def file_of(nodeid: str) -> str:
    """The test file of a node id (``path::name[param]`` → ``path``)."""
    return nodeid.split("::", 1)[0]


def rank(path: str, integration: bool) -> int:
    """Where ``path``'s tests go: SLOWEST's in its order, then integration, then unit files."""
    try:
        return SLOWEST.index(path)
    except ValueError:
        return len(SLOWEST) + (0 if integration else 1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Collected items regrouped by :func:`rank` (stable: a file's own order is kept)."""
    ranks: dict[str, int] = {}
    for item in items:
        path = file_of(item.nodeid)
        if path not in ranks:
            ranks[path] = rank(path, item.get_closest_marker("integration") is not None)
    items.sort(key=lambda item: ranks[file_of(item.nodeid)])
