"""A table without a key, re-snapshotted and verified while it is written every 5 ms.

No key names its rows, so the copy cannot leave "the rows the stream changed"
alone as it does for keyed tables: the worker replays the stream's changes that
the read's snapshot did not see on the rows it read. A thread inserts (and now
and then updates or deletes) a row every 5 ms, duplicates everywhere, during
``set resnapshot``, a clean ``set verify`` (no difference), a verify of a copy
short of one row (the copy is reported one row short, never larger) and its
``--repair``; at the end the copy equals the source as a multiset.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from pgshovel.sandbox import SandboxConnection

from ._requests import SET, make_stack, run_sql
from ._threads import WriterThreads

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]

SCHEMA = [
    "CREATE TABLE journal (n integer, note text)",
    "INSERT INTO journal SELECT g % 50, 'row ' || (g % 7) FROM generate_series(1, 600) g",
    # rows the writer never touches (its rows have n < 50), three times the same
    "INSERT INTO journal SELECT 999, 'still' FROM generate_series(1, 3)",
]


class JournalWriter(WriterThreads):
    """One transaction every 5 ms: mostly inserts of duplicate rows, some updates and deletes."""

    pause = 0.005

    def write(self, cursor: Any, rng: random.Random) -> None:
        choice = rng.random()
        n = rng.randrange(50)
        if choice < 0.7:
            cursor.execute("INSERT INTO journal VALUES (%s, 'written')", (n,))
        elif choice < 0.85:
            cursor.execute(
                "UPDATE journal SET note = note || '+' WHERE ctid = "
                "(SELECT ctid FROM journal WHERE n = %s LIMIT 1)",
                (n,),
            )
        else:
            cursor.execute(
                "DELETE FROM journal WHERE ctid = (SELECT ctid FROM journal WHERE n = %s LIMIT 1)",
                (n,),
            )


def test_an_unkeyed_table_is_copied_and_verified_exactly_while_it_is_written(
    sandbox: SandboxConnection,
    make_database: Any,
    zookeeper: KazooClient,
    cluster_name: str,
    kafka_config: dict[str, str],
    tmp_path: Path,
    processes: list[Any],
) -> None:
    stack = make_stack(sandbox, make_database, cluster_name, tmp_path, processes, kafka_config)
    stack.start(zookeeper, SCHEMA, [{"name": "journal"}], allow_unkeyed=True)
    stack.caught_up()
    stack.assert_equal("journal")
    writer = JournalWriter(stack.source, threads=1)
    writer.start()
    try:
        code, output = stack.admin("resnapshot", SET, "journal")
        assert code == 0, output
        assert "public.journal: resnapshot" in output, output
        code, output = stack.admin("verify", SET, "journal")
        assert code == 0, output
        assert "no difference" in output, output

        # One row fewer in the copy: reported as one row fewer, whatever is written meanwhile.
        run_sql(
            stack.target,
            "DELETE FROM journal WHERE ctid = (SELECT ctid FROM journal WHERE n = 999 LIMIT 1)",
        )
        code, output = stack.admin("verify", SET, "journal")
        assert code == 1, output
        found = re.search(
            r"holding (\d+) row\(s\) in the source and (\d+) row\(s\) in the copy", output
        )
        assert found is not None, output
        assert int(found.group(2)) == int(found.group(1)) - 1, output
        code, output = stack.admin("verify", SET, "journal", "--repair")
        assert code == 0, output
        assert "public.journal: repair of" in output, output
        committed = writer.committed
    finally:
        writer.stop()
    assert committed > 100, "the table was written while it was copied"
    stack.caught_up()
    stack.assert_equal("journal")  # as multisets: duplicates counted
    assert stack.worker.alive()
