"""``pgshovel-admin set wait SET TXID``: block until every copy of a set holds a source transaction.

Each running worker publishes, in its ZooKeeper status node, the horizon of
what its copy holds: the txid snapshot of the last applied batch's end tick
(every transaction visible in it is applied). The command asks the source
what became of the transaction (``txid_status``): one that rolled back will
never be applied (exit 2, at once); otherwise it waits until the transaction
is visible in the horizon of every running worker (exit 0), or the timeout
(exit 1). A transaction that touched no captured table counts as applied as
soon as a later tick covers it. A TXID the source never gave — not a number
from 1 to 2^63 - 1, or in the source's future (past what ``txid_current()``
has handed out) — can never be applied: exit 3 at once, one line.
"""

from __future__ import annotations

import json
import re
import time

import psycopg2.errors
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from psycopg2.extensions import connection

from pgshovel.cluster import names
from pgshovel.errors import NoSuchTransaction
from pgshovel.stream.handoff import is_visible, parse_txid_snapshot

APPLIED, TIMED_OUT, ROLLED_BACK, NO_SUCH_TRANSACTION = 0, 1, 2, 3

#: ``txid_current()`` values: 64 bits, epoch and xid, always positive.
_MAX_TXID = 2**63 - 1


def parse_txid(text: str) -> int:
    """The transaction id in ``text``; ``NoSuchTransaction`` unless it is one a source can
    give (1 to 2^63 - 1, as ``txid_current()`` prints it)."""
    if re.fullmatch(r"[0-9]{1,30}", text.strip()) is None or not 0 < int(text) <= _MAX_TXID:
        raise NoSuchTransaction(
            f"{text!r} is not a transaction id: give the number txid_current() returned in the "
            "transaction (1 to 2^63 - 1)"
        )
    return int(text)


def horizons(client: KazooClient, cluster: str, set_name: str) -> dict[str, str]:
    """Each running worker's applied horizon ("" while it loads its snapshot)."""
    path = names.workers_path(cluster, set_name)
    try:
        children = client.get_children(path)
    except NoNodeError:
        return {}
    found: dict[str, str] = {}
    for child in children:
        try:
            data, _ = client.get(f"{path}/{child}")
        except NoNodeError:
            continue  # that worker just stopped
        found[child] = str(json.loads(data).get("horizon") or "")
    return found


def covered(txid: int, found: dict[str, str]) -> bool:
    """Whether every worker's horizon holds ``txid`` (False with no worker running)."""
    return bool(found) and all(
        horizon and is_visible(txid, parse_txid_snapshot(horizon)) for horizon in found.values()
    )


def transaction_status(source: connection, txid: int) -> str | None:
    """``committed``, ``aborted``, ``in progress``, or None (too old to tell: the source no
    longer knows; then only the horizons answer). ``NoSuchTransaction`` for a txid in the
    source's future."""
    with source.cursor() as cursor:
        cursor.execute("SELECT txid_snapshot_xmax(txid_current_snapshot())")
        row = cursor.fetchone()
        following = None if row is None else int(row[0])
        if following is not None and txid >= following:
            source.rollback()
            raise NoSuchTransaction(_future(txid, following))
        try:
            cursor.execute("SELECT txid_status(%s)", (txid,))
        except psycopg2.errors.InvalidParameterValue as error:  # raced past the check above
            source.rollback()
            raise NoSuchTransaction(_future(txid, following)) from error
        row = cursor.fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _future(txid: int, following: int | None) -> str:
    given = "" if following is None else f" (the next one it gives is {following})"
    return (
        f"transaction {txid} is in the source's future: the source has not given that id "
        f"yet{given}; give the number txid_current() returned in the transaction"
    )


def wait(
    client: KazooClient,
    source: connection,
    cluster: str,
    set_name: str,
    txid: int,
    timeout: float,
    interval: float = 0.02,
) -> tuple[int, str]:
    """(exit status, message) once ``txid`` is applied everywhere, rolled back, or late."""
    deadline = time.monotonic() + timeout
    status = transaction_status(source, txid)
    while True:
        if status == "aborted":
            return ROLLED_BACK, f"transaction {txid} rolled back: nothing of it will be applied"
        found = horizons(client, cluster, set_name)
        if status != "in progress" and covered(txid, found):
            return APPLIED, f"transaction {txid} is applied in {len(found)} cop(ies)"
        if time.monotonic() >= deadline:
            running = f"{len(found)} worker(s) running" if found else "no worker running"
            return (
                TIMED_OUT,
                f"transaction {txid} not applied everywhere after {timeout:g}s ({running})",
            )
        time.sleep(interval)
        if status == "in progress":
            status = transaction_status(source, txid)
