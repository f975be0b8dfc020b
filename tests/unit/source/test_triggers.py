"""A set trigger's captured columns read back exactly as admin wrote them, and nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.admin.install import text_array_literal
from pgshovel.source._triggers import text_array

NAMES = st.lists(st.text(st.characters(exclude_characters="\x00"), min_size=1), max_size=6)


@settings(deadline=None)
@given(NAMES)
def test_captured_columns_read_back_as_written(names: list[str]) -> None:
    assert text_array(text_array_literal(names)) == tuple(names)


def test_columns_with_quotes_commas_and_backslashes() -> None:
    names = ['a"b', "c,d", "e\\f", "{g}", " h "]
    assert text_array(text_array_literal(names)) == tuple(names)


def test_other_text_is_not_taken_for_a_column_list() -> None:
    for text in ("", "a,b", "{a,b}", '{"a",}', '{"a"', '{"a\\"}', '{"a""b"}', '["a"]'):
        assert text_array(text) is None, text
