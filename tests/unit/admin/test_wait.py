"""set wait's verdict from the workers' horizons (pure)."""

from __future__ import annotations

import pytest

from pgshovel.admin.wait import covered, parse_txid
from pgshovel.errors import NoSuchTransaction


def test_a_transaction_is_applied_once_every_worker_horizon_holds_it() -> None:
    assert covered(99, {"a": "100:105:", "b": "100:100:"})
    assert covered(102, {"a": "100:105:103"})  # committed before the tick, 103 still running
    assert not covered(103, {"a": "100:105:103"})  # in progress at the tick
    assert not covered(105, {"a": "100:105:"})  # at or after xmax: not yet
    assert not covered(102, {"a": "100:105:", "b": ""})  # a worker still loading its snapshot
    assert not covered(1, {})  # no worker running: nothing holds it


def test_only_a_txid_a_source_can_give_is_waited_for() -> None:
    assert parse_txid("1") == 1 and parse_txid(str(2**63 - 1)) == 2**63 - 1
    for text in ("0", str(2**63), str(2**70), "-5", "12abc", "", "1e3", "9" * 40):
        with pytest.raises(NoSuchTransaction) as raised:
            parse_txid(text)
        assert "is not a transaction id" in str(raised.value)
