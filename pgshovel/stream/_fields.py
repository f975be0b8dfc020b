"""Typed reads of a stored JSON document, each failure a ``StateError`` naming the field.

The worker state and the stream position are stored by targets as JSON, where
anyone with access to the target can change them. Reading them goes through
these helpers so that a document that does not have the expected shape (an
object where a list belongs, a missing field, text where a number belongs)
fails with one line naming the field, e.g. ``tasks[0].ranges[2]: expected a
list of 2 bounds, got 3``, never with a ``KeyError`` or ``TypeError`` from deep
inside a constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pgshovel.errors import StateError

T = TypeVar("T")

MISSING = object()


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def wrong(path: str, expected: str, value: Any) -> StateError:
    """The error of field ``path`` holding ``value`` instead of ``expected``."""
    shown = repr(value) if isinstance(value, str | int | float) else _kind(value)
    if isinstance(value, str) and len(shown) > 40:
        shown = shown[:37] + "...'"
    return StateError(f"field {path!r}: expected {expected}, got {shown}")


def obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise wrong(path, "an object", value)
    return value


def field(document: dict[str, Any], key: str, path: str, default: Any = MISSING) -> Any:
    """``document[key]``; a missing key is an error unless a default is given (a missing key
    and null both give the default)."""
    where = f"{path}.{key}" if path else key
    if key not in document or (document[key] is None and default is not MISSING):
        if default is MISSING:
            raise StateError(f"field {where!r} is missing")
        return default
    return document[key]


def path_of(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def integer(value: Any, path: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong(path, "an integer", value)
    if minimum is not None and value < minimum:
        raise wrong(path, f"an integer of at least {minimum}", value)
    return value


def text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise wrong(path, "text", value)
    return value


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise wrong(path, "true or false", value)
    return value


def hexadecimal(value: Any, path: str) -> bytes:
    if not isinstance(value, str):
        raise wrong(path, "hexadecimal text", value)
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise wrong(path, "hexadecimal text", value) from None


def items(value: Any, path: str, read: Callable[[Any, str], T]) -> tuple[T, ...]:
    """Every element of the list ``value`` read with ``read(element, "path[i]")``."""
    if not isinstance(value, list):
        raise wrong(path, "a list", value)
    return tuple(read(element, f"{path}[{index}]") for index, element in enumerate(value))


def fixed(value: Any, path: str, length: int) -> list[Any]:
    """The list ``value``, which must have exactly ``length`` elements."""
    if not isinstance(value, list):
        raise wrong(path, f"a list of {length}", value)
    if len(value) != length:
        raise StateError(f"field {path!r}: expected a list of {length}, got a list of {len(value)}")
    return value
