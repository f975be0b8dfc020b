"""COPY text encoding: any text (tabs, newlines, backslashes) and NULL survive a round trip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pgshovel.source.copytext import decode_line, encode_row


def test_special_characters_are_escaped() -> None:
    assert encode_row(["a\tb", None, "c\\d\ne\r"]) == "a\\tb\t\\N\tc\\\\d\\ne\\r\n"


def test_copy_output_escapes_are_decoded() -> None:
    assert decode_line("x\\by\\f\\v\\101\\x42\t\\N\t\n") == ("x\by\f\vAB", None, "")


@given(st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=5))
def test_round_trip(values: list[str | None]) -> None:
    assert decode_line(encode_row(values)) == tuple(values)
