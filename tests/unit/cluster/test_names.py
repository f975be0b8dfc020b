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


@pytest.mark.parametrize(
    ("tables", "expected"),
    [
        # schema a's table b and public's table "a.b": both '[prefix.]a.b' under any prefix
        ([("a", "b"), ("public", "a.b")], (("a", "b"), ("public", "a.b"), "a.b")),
        ([("public", "a.b"), ("x", "y"), ("a", "b")], (("public", "a.b"), ("a", "b"), "a.b")),
        # a dotted schema name against a dotted table name in another schema
        ([("a.b", "c"), ("a", "b.c")], (("a.b", "c"), ("a", "b.c"), "a.b.c")),
        ([("public", "t"), ("s", "t"), ("public", "T")], None),
        ([("a", "b"), ("a", "b.c"), ("public", "b")], None),
        ([], None),
    ],
)
def test_tables_whose_table_topics_share_a_name_under_any_prefix(
    tables: list[tuple[str, str]],
    expected: tuple[tuple[str, str], tuple[str, str], str] | None,
) -> None:
    assert names.colliding_tables(tables) == expected


def test_table_topic_suffix_leaves_public_out() -> None:
    assert names.table_topic_suffix("public", "items") == "items"
    assert names.table_topic_suffix("sales", "orders") == "sales.orders"
