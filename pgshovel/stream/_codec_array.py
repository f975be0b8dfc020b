"""PostgreSQL array literals <-> shape plus element texts, in row-major order.

An array's text is ``{a,b}``, ``{{1,NULL},{3,4}}`` or, when a lower bound is
not 1, ``[0:1]={1,2}``. Elements are bare or double-quoted with backslash
escapes, and an unquoted ``NULL`` is SQL NULL. Parsing follows PostgreSQL's
``array_in`` (whitespace around elements is ignored unless quoted or escaped;
sub-arrays must be rectangular); formatting follows ``array_out`` (an element is
quoted when it is empty, spells NULL, or holds a quote, backslash, brace,
comma or whitespace), so formatting what was parsed gives PostgreSQL's text.
This module knows nothing about element types. Bad text raises ``ValueError``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

_WHITESPACE = " \t\n\r\v\f"
_DECORATION_RE = re.compile(r"((?:\[[+-]?[0-9]+(?::[+-]?[0-9]+)?\])+)[ \t\n\r\v\f]*=")
_BOUND_RE = re.compile(r"\[([+-]?[0-9]+)(?::([+-]?[0-9]+))?\]")
_TOKEN_RE = re.compile(
    r"[ \t\n\r\v\f]*(?:"
    r"(\{)|(\})|(,)"
    r'|"((?:[^"\\]|\\.)*)"'
    r'|((?:[^{}",\\]|\\.)+)'
    r")",
    re.DOTALL,
)
_ESCAPE_RE = re.compile(r"\\(.)", re.DOTALL)
_NEEDS_QUOTES_RE = re.compile(r'[ \t\n\r\v\f"\\{},]')
# Text of a flat array free of these needs no tokenizer; free of whitespace too,
# it is just its elements between commas.
_FAST_PATH_BREAKER = re.compile(r'["\\{}]').search
_PLAIN_BREAKER = re.compile(r'["\\{}\s]').search

Shape = tuple[list[int], list[int]]


def _bare_element(token: str) -> str | None:
    """The value of an unquoted element: trimmed, unescaped; None for NULL."""
    if "\\" not in token:
        element = token.rstrip(_WHITESPACE)
        if len(element) == 4 and element.upper() == "NULL":
            return None
        return element
    # Escaped characters are kept even when they are whitespace at the end.
    chars: list[str] = []
    kept = 0
    index = 0
    while index < len(token):
        char = token[index]
        if char == "\\":
            index += 1
            chars.append(token[index])
            kept = len(chars)
        else:
            chars.append(char)
            if char not in _WHITESPACE:
                kept = len(chars)
        index += 1
    return "".join(chars[:kept])


def _split_simple(inner: str) -> list[str | None]:
    """Elements of a one-dimensional array without quotes, escapes or braces."""
    if not inner.strip(_WHITESPACE):
        return []
    elements: list[str | None] = []
    for token in inner.split(","):
        element = token.strip(_WHITESPACE)
        if not element:
            raise ValueError("an array element is missing between commas")
        if len(element) == 4 and element.upper() == "NULL":
            elements.append(None)
        else:
            elements.append(element)
    return elements


class _NestedParser:
    """Builds the nested lists of an array's braces, one token at a time."""

    def __init__(self) -> None:
        self.root: list[object] = []
        self.stack: list[list[object]] = []
        self.expect_element = True  # after '{' or ','; False after an element or '}'
        self.just_opened = False

    def open(self, position: int) -> None:
        if not self.expect_element:
            raise ValueError(f"unexpected '{{' at position {position}")
        child: list[object] = []
        if self.stack:
            self.stack[-1].append(child)
        else:
            self.root = child
        self.stack.append(child)
        self.just_opened = True

    def close(self, position: int) -> bool:
        """Close the innermost braces; True when the outermost ones closed."""
        if self.expect_element and not self.just_opened:
            raise ValueError(f"an element is missing before '}}' at position {position}")
        self.stack.pop()
        self.expect_element = self.just_opened = False
        return not self.stack

    def comma(self, position: int) -> None:
        if self.expect_element:
            raise ValueError(f"an element is missing before ',' at position {position}")
        self.expect_element = True
        self.just_opened = False

    def element(self, position: int, value: str | None) -> None:
        if not self.expect_element:
            raise ValueError(f"a ',' is missing before position {position}")
        self.stack[-1].append(value)
        self.expect_element = self.just_opened = False


def _parse_nested(text: str, position: int) -> list[object]:
    """The nested lists of element values of the braces starting at ``position``."""
    parser = _NestedParser()
    while True:
        match = _TOKEN_RE.match(text, position)
        if match is None:
            raise ValueError(f"unexpected character at position {position}")
        position = match.end()
        opened, closed, comma, quoted, bare = match.groups()
        if opened:
            parser.open(position - 1)
            continue
        if not parser.stack:
            raise ValueError("an array must start with '{'")
        if closed:
            if parser.close(position - 1):
                break
        elif comma:
            parser.comma(position - 1)
        elif quoted is not None:
            unquoted = _ESCAPE_RE.sub(r"\1", quoted) if "\\" in quoted else quoted
            parser.element(match.start(), unquoted)
        else:
            parser.element(match.start(), _bare_element(bare))
    if text[position:].strip(_WHITESPACE):
        raise ValueError(f"unexpected text after the array at position {position}")
    return parser.root


def _flatten(root: list[object]) -> tuple[list[int], list[str | None]]:
    """Dimensions and row-major elements of rectangular nested lists."""
    if not root:
        return [], []
    dimensions: list[int] = []
    node: object = root
    while isinstance(node, list):
        if not node:
            raise ValueError("a sub-array is empty")
        dimensions.append(len(node))
        node = node[0]
    level: list[object] = root
    for depth, size in enumerate(dimensions[1:]):
        below: list[object] = []
        for sub in level:
            if not isinstance(sub, list) or len(sub) != size:
                raise ValueError(f"sub-arrays at depth {depth + 1} differ in size or nesting")
            below.extend(sub)
        level = below
    if any(isinstance(item, list) for item in level):
        raise ValueError("sub-arrays differ in nesting depth")
    return dimensions, cast("list[str | None]", level)


def _parse_decoration(decoration: str) -> list[tuple[int, int]]:
    bounds = []
    for lower, upper in _BOUND_RE.findall(decoration):
        low, high = (int(lower), int(upper)) if upper else (1, int(lower))
        bounds.append((low, high))
    return bounds


def parse_array(text: str) -> tuple[list[int], list[int], list[str | None]]:
    """``(dimensions, lower bounds, elements)`` of an array literal."""
    if text.startswith("{") and text.endswith("}"):
        end = len(text) - 1
        if _PLAIN_BREAKER(text, 1, end) is None:
            # The common case: a flat array of bare, non-NULL elements.
            plain = text[1:end].split(",")
            if "" not in plain and "NULL" not in text.upper():
                return [len(plain)], [1], cast("list[str | None]", plain)
        if _FAST_PATH_BREAKER(text, 1, end) is None:
            elements = _split_simple(text[1:end])
            return ([len(elements)], [1], elements) if elements else ([], [], [])
    position = 0
    declared: list[tuple[int, int]] | None = None
    decoration = _DECORATION_RE.match(text)
    if decoration is not None:
        declared = _parse_decoration(decoration.group(1))
        position = decoration.end()
    dimensions, elements = _flatten(_parse_nested(text, position))
    if declared is None:
        return dimensions, [1] * len(dimensions), elements
    if [high - low + 1 for low, high in declared] != dimensions:
        raise ValueError("the declared dimensions do not match the array's contents")
    return dimensions, [low for low, _ in declared], elements


def _quote(element: str | None) -> str:
    if element is None:
        return "NULL"
    if not element or (len(element) == 4 and element.upper() == "NULL"):
        return f'"{element}"'
    if _NEEDS_QUOTES_RE.search(element) is None:
        return element
    return '"' + element.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_array(
    dimensions: Sequence[int], lower_bounds: Sequence[int], elements: Sequence[str | None]
) -> str:
    """PostgreSQL's text of an array of the given shape and element texts."""
    if not dimensions:
        if elements:
            raise ValueError("an array without dimensions has elements")
        return "{}"
    if len(lower_bounds) != len(dimensions):
        raise ValueError("an array needs one lower bound per dimension")
    total = 1
    for size in dimensions:
        total *= size
    if total != len(elements) or total == 0:
        raise ValueError(f"dimensions {list(dimensions)!r} do not hold {len(elements)} elements")
    parts = [_quote(element) for element in elements]
    for size in reversed(dimensions[1:]):
        parts = ["{" + ",".join(parts[i : i + size]) + "}" for i in range(0, len(parts), size)]
    body = "{" + ",".join(parts) + "}"
    if all(bound == 1 for bound in lower_bounds):
        return body
    bounds = zip(lower_bounds, dimensions, strict=True)
    prefix = "".join(f"[{low}:{low + size - 1}]" for low, size in bounds)
    return f"{prefix}={body}"
