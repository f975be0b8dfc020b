"""Cluster and set names: the safe charset, the length limits and the derived names."""

from __future__ import annotations

import pytest

from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError


def test_derived_names_follow_the_design() -> None:
    assert names.cluster_path("prod") == "/prod"
    assert names.set_path("prod", "orders") == "/prod/sets/orders"
    assert names.relay_path("prod", "orders") == "/prod/sets/orders/relay"
    assert names.schema_name("prod") == "pgshovel_prod"
    assert names.trigger_name("prod", "orders") == "pgshovel_prod_orders"
    assert names.queue_name("prod", "orders") == "pgshovel.prod.orders"


@pytest.mark.parametrize("name", ["a/b", "x y", "", "é", "a.b", "../etc", 'q"'])
def test_unsafe_names_are_refused_with_the_name(name: str) -> None:
    with pytest.raises(ConfigurationError, match="letters, digits") as caught:
        names.validate_set_name(name)
    assert repr(name) in str(caught.value)


def test_longest_names_still_fit_postgres_identifiers() -> None:
    cluster = "c" * names.CLUSTER_NAME_MAX
    set_name = "s" * names.SET_NAME_MAX
    assert len(names.truncate_trigger_name(cluster, set_name)) <= 63
    with pytest.raises(ConfigurationError, match="at most 20"):
        names.validate_cluster_name(cluster + "c")
