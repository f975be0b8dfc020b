"""set wait's verdict from the workers' horizons (pure)."""

from __future__ import annotations

from pgshovel.admin.wait import covered


def test_a_transaction_is_applied_once_every_worker_horizon_holds_it() -> None:
    assert covered(99, {"a": "100:105:", "b": "100:100:"})
    assert covered(102, {"a": "100:105:103"})  # committed before the tick, 103 still running
    assert not covered(103, {"a": "100:105:103"})  # in progress at the tick
    assert not covered(105, {"a": "100:105:"})  # at or after xmax: not yet
    assert not covered(102, {"a": "100:105:", "b": ""})  # a worker still loading its snapshot
    assert not covered(1, {})  # no worker running: nothing holds it
