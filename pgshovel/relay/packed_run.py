"""A run of a packed row's changes written as COPY lines (``ext/packing.c``, contract 5).

The capture trigger writes the changes of a table captured without provenance as
COPY text lines of the table's captured columns, which its packed row names: an
INSERT's new row, a DELETE's old row, an UPDATE's old and new rows (two lines).
``PackedRun`` holds such a run as read from the queue, its lines still bytes, so
the ROWS encoding can forward them without parsing a value
(``RowsEncoder.encode_packed``); ``split`` cuts it in two (the framer encodes a
long run in pieces), and ``events`` turns it into the events an
unpacked queue would hold, each ``ev_data`` already parsed (``[old, new]`` of
column-to-text mappings, what ``event_data.parse_rows`` reads from JSON) for
every other reader. Pure.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, NamedTuple

from pgshovel.abc import EventRow
from pgshovel.errors import CodecError
from pgshovel.stream.rows import split_line

__all__ = ["UPDATE", "PackedRun", "lines_per_change"]

#: ``ev_type`` of an UPDATE: two lines per change (old, new)
UPDATE = "U"


def lines_per_change(kind: str) -> int:
    """The COPY lines a change of event type ``kind`` takes."""
    return 2 if kind == UPDATE else 1


class PackedRun(NamedTuple):
    """``size`` changes with the ids ``id`` .. ``id + size - 1`` of one transaction,
    event type and table; the first nine fields are those of an ``EventRow`` (``lines``
    where ``ev_data`` is), so ``run[0]`` is its first id and ``run[1]`` its time."""

    id: int
    time: int
    txid: int
    type: str
    lines: list[bytes]
    schema: str
    name: str
    version: str
    keys: str
    columns: tuple[str, ...]
    size: int
    #: the packed row it came from, named in errors
    row_id: int

    def split(self, head: int) -> tuple[PackedRun, PackedRun]:
        """The run's first ``head`` changes (0 < head < size) and the rest."""
        cut = head * lines_per_change(self.type)
        return (
            self._replace(lines=self.lines[:cut], size=head),
            self._replace(id=self.id + head, lines=self.lines[cut:], size=self.size - head),
        )

    def rows(self) -> list[dict[str, str | None]]:
        """Each line's values by column name, in line order."""
        columns = self.columns
        width = len(columns)
        rows = []
        for line in self.lines:
            try:
                values = split_line(line)
            except UnicodeDecodeError as error:
                raise self._malformed(f"has a line that is not UTF-8 ({error})") from None
            if len(values) != width:
                raise self._malformed(
                    f"has a line of {len(values)} fields for its {width} columns {list(columns)!r}"
                )
            rows.append(dict(zip(columns, values, strict=True)))
        return rows

    def events(self) -> list[EventRow]:
        """The run's changes as the events an unpacked queue would hold, ``ev_data`` parsed."""
        rows = self.rows()
        data: list[Any]
        if self.type == UPDATE:
            data = [[old, new] for old, new in zip(rows[0::2], rows[1::2], strict=True)]
        elif self.type == "D":
            data = [[row, None] for row in rows]
        else:
            data = [[None, row] for row in rows]
        return list(
            zip(
                range(self.id, self.id + self.size),
                repeat(self.time),
                repeat(self.txid),
                repeat(self.type),
                data,
                repeat(self.schema),
                repeat(self.name),
                repeat(self.version),
                repeat(self.keys),
            )
        )

    def _malformed(self, why: str) -> CodecError:
        return CodecError(
            f"packed event {self.row_id} (changes {self.id} to {self.id + self.size - 1} of "
            f"table {self.schema!r}.{self.name!r}) {why}; was it written by a pgshovel capture "
            "trigger?"
        )
