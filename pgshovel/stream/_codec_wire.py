"""Protocol Buffers wire format, the few pieces the relay's encoders write by hand.

Building a message field by field through the protobuf runtime costs a Python
call per field; the relay instead joins pre-encoded pieces (a column's name,
a field's tag) with the few bytes that vary (lengths, numbers). These helpers
produce exactly what the runtime serializes: fields in field-number order,
proto3 scalars left out at their zero value, a oneof member written even at
zero. Numbers must be in range of their field (callers check).
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Sequence
from itertools import repeat

__all__ = ["clustered_varint", "length_prefixed", "signed", "varint", "varints", "zigzag"]

# Lengths and small numbers are nearly always below 2**14: two bytes at most,
# looked up; a larger number goes 14 bits (two bytes) at a time.
_CACHED = 1 << 14
_VARINTS = [
    bytes([number]) if number < 128 else bytes([(number & 0x7F) | 0x80, number >> 7])
    for number in range(_CACHED)
]
_CONTINUED = [bytes([(number & 0x7F) | 0x80, (number >> 7) | 0x80]) for number in range(_CACHED)]
_LOW_BITS = _CACHED - 1
_UINT64_MASK = (1 << 64) - 1

pack_double = struct.Struct("<d").pack


def varint(number: int) -> bytes:
    """The base-128 varint of ``number`` (0 to 2**64 - 1)."""
    if number < _CACHED:
        return _VARINTS[number]
    out = _CONTINUED[number & _LOW_BITS]
    number >>= 14
    while number >= _CACHED:
        out += _CONTINUED[number & _LOW_BITS]
        number >>= 14
    return out + _VARINTS[number]


def varints(numbers: Sequence[int]) -> list[bytes]:
    """``signed`` of each of ``numbers``, without a Python call per number when they are
    all below 2**14 or share the bits above (a run's lengths, a run's event ids)."""
    if not numbers:
        return []
    low, high = min(numbers), max(numbers)
    if low < 0:
        return [signed(number) for number in numbers]
    if high < _CACHED:
        return list(map(_VARINTS.__getitem__, numbers))
    if low >= _CACHED and low >> 14 == high >> 14:
        rest = varint(low >> 14)
        lows = map(_CONTINUED.__getitem__, map(_LOW_BITS.__and__, numbers))
        return list(map(operator.add, lows, repeat(rest)))
    return list(map(varint, numbers))


def signed(number: int) -> bytes:
    """The varint of an ``int64`` field: a negative number takes ten bytes (two's complement)."""
    return varint(number & _UINT64_MASK) if number < 0 else varint(number)


def zigzag(number: int) -> bytes:
    """The varint of a ``sint32`` or ``sint64`` field (zigzag: 0, -1, 1, -2 -> 0, 1, 2, 3)."""
    return varint((number << 1) ^ (number >> 63))


def length_prefixed(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes or message) with its tag."""
    return tag + varint(len(payload)) + payload


def clustered_varint() -> Callable[[int], bytes]:
    """``signed`` for numbers that come clustered: a clock's readings, a batch's timestamps.

    The low 14 bits come from a table; the varint of the rest is kept from the
    previous number (for microseconds, it changes every 16 ms).
    """
    last_high = -1
    last_high_varint = b""

    def encode(number: int) -> bytes:
        nonlocal last_high, last_high_varint
        if number < _CACHED:
            return _VARINTS[number] if number >= 0 else signed(number)
        high = number >> 14
        if high != last_high:
            last_high, last_high_varint = high, varint(high)
        return _CONTINUED[number & _LOW_BITS] + last_high_varint

    return encode
