"""`set wait` with a transaction id the source never gave: one line and exit 3, at once.

A txid beyond what a txid can be (0, 2^63 and above, not a number) and one in the
source's future (never assigned yet) cannot be waited for: no traceback, no
timeout, and not the codes of a timeout (1) or a rollback (2).
"""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from pgshovel.admin.wait import NO_SUCH_TRANSACTION
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import admin, execute, rows
from tests.integration.capture._capture import SET, install

pytestmark = pytest.mark.integration


def test_a_txid_the_source_never_gave_is_refused_at_once(
    sandbox: SandboxConnection,
    database: str,
    zookeeper: KazooClient,
    cluster_name: str,
) -> None:
    execute(database, "CREATE TABLE items (id integer PRIMARY KEY)")
    install(zookeeper, cluster_name, database, [{"name": "items"}])
    (current,) = rows(database, "SELECT txid_current()")[0]
    cases = {
        str(current + 1_000_000): "is in the source's future",
        str(2**70): "is not a transaction id",
        str(2**63): "is not a transaction id",
        "0": "is not a transaction id",
        "12abc": "is not a transaction id",
    }
    for txid, reason in cases.items():
        result = admin(sandbox, cluster_name, "set", "wait", SET, txid, "--timeout", "600")
        assert result.returncode == NO_SUCH_TRANSACTION == 3, (txid, result)
        lines = result.stdout.splitlines() + result.stderr.splitlines()
        assert len(lines) == 1 and reason in lines[0] and txid in lines[0], (txid, lines)
        assert "Traceback" not in result.stderr
