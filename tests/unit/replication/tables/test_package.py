"""The package's public names resolve (lazily) to what they document."""

from __future__ import annotations

import importlib

import pytest

import pgshovel.replication.tables as tables


@pytest.mark.parametrize("name", tables.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(tables, name).__name__ == name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        importlib.import_module("pgshovel.replication.tables").nothing  # noqa: B018
