"""The worker state's document: round trip, the forms earlier releases stored, tampering.

A stored state can be edited by anyone with access to the target; whatever it
holds, reading it gives a state or one ``StateError`` naming the field, never a
``KeyError``/``TypeError``/``ValueError`` from inside a constructor.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import StateError
from pgshovel.replication.targets._pgupgrade import legacy_document
from pgshovel.source import Column, TableShape
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState, from_document, to_document

NODE = bytes(range(16))
PUBLISHER = bytes(range(16, 32))

SHAPE = TableShape(
    "public",
    "items",
    columns=(Column("id", "integer", "int4", True, 1), Column("note", "text", "text", False, 2)),
    key=("id",),
    relation=16384,
)
TASK = SnapshotTask(
    "t1",
    "public",
    "items",
    "verify",
    where="id > 3",
    ranges=((None, ("10",)), (("10",), None)),
    done=(0,),
    origin="request-0000000001",
    differences=((0, 5, 4, 1),),
    rows=5,
    estimate=20,
)
STATE = WorkerState(
    "streaming",
    "10:20:12,15",
    StreamPosition((PartitionCursor(42, PUBLISHER, 7, 3),), ((NODE, 12),)),
    tables=(SHAPE,),
    broken=(("public", "gone"),),
    tasks=(TASK,),
    horizon="30:30:",
)


def test_the_document_round_trips_through_json() -> None:
    document = json.loads(json.dumps(to_document(STATE)))
    assert document["version"] == 2
    assert from_document(document) == STATE
    start = WorkerState("snapshot", "1:1:", StreamPosition.start((5,)))
    assert from_document(json.loads(json.dumps(to_document(start)))) == start


def release_02_document() -> dict[str, Any]:
    """A state as 0.2 stored it (the Parquet state file's fields)."""
    return {
        "phase": "streaming",
        "snapshot": "10:20:12,15",
        "start_offset": 3,
        "position": {
            "offset": 41,
            "publisher": PUBLISHER.hex(),
            "sequence": 7,
            "epoch": 3,
            "committed": [[NODE.hex(), 12]],
        },
        "tables": [
            {
                "schema": "public",
                "name": "items",
                "key": ["id"],
                "relation": 16384,
                "columns": [["id", "integer", "int4", True, 1], ["note", "text", "text", False, 2]],
            }
        ],
        "broken": [["public", "gone"]],
        "tasks": [
            {
                "id": "t1",
                "schema": "public",
                "table": "items",
                "purpose": "verify",
                "where": "id > 3",
                "ranges": [[None, ["10"]], [["10"], None]],
                "done": [0],
                "origin": "request-0000000001",
                "differences": [[0, 5, 4, 1]],
                "rows": 5,
                "estimate": 20,
            }
        ],
        "horizon": "30:30:",
    }


def test_reads_the_document_of_the_previous_release() -> None:
    assert from_document(release_02_document()) == STATE


def test_a_previous_release_before_its_first_batch_resumes_at_its_start_offset() -> None:
    document = {**release_02_document(), "position": None}
    assert from_document(document).position == StreamPosition.start((3,))


def test_reads_a_document_of_0_1_without_tables_tasks_or_horizon() -> None:
    document = release_02_document()
    for name in ("tables", "broken", "tasks", "horizon"):
        del document[name]
    state = from_document(document)
    assert (state.tables, state.broken, state.tasks, state.horizon) == ((), (), (), "")
    assert state.position == STATE.position


def old_row(**changes: Any) -> dict[str, Any]:
    """A row of 0.2's state table as ``to_jsonb`` shows it."""
    row = {
        "cluster": "c",
        "set_name": "s",
        "phase": "streaming",
        "snapshot": "10:20:12,15",
        "start_offset": 3,
        "position_offset": 41,
        "publisher": "\\x" + PUBLISHER.hex(),
        "sequence": 7,
        "epoch": 3,
        "committed_nodes": ["\\x" + NODE.hex()],
        "committed_batches": [12],
        "updated_at": "2026-01-01T00:00:00+00:00",
        **{key: release_02_document()[key] for key in ("tables", "broken", "tasks", "horizon")},
    }
    row.update(changes)
    return row


def test_a_row_of_the_old_state_table_reads_as_the_same_state() -> None:
    assert from_document(legacy_document(old_row())) == STATE
    fresh = legacy_document(old_row(position_offset=None, publisher=None, sequence=None))
    assert from_document(fresh).position == StreamPosition.start((3,))


def test_a_row_of_0_1_reads_with_the_defaults() -> None:
    row = old_row()
    for name in ("tables", "broken", "tasks", "horizon"):
        del row[name]
    state = from_document(legacy_document(row))
    assert state.tables == () and state.horizon == "" and state.position == STATE.position


def set_at(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    tampered = copy.deepcopy(document)
    target = tampered
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return tampered


TAMPERED = [
    # lists of different lengths
    (("tables", 0, "columns", 0), ["id", "integer", "int4", True], "tables[0].columns[0]"),
    (("tasks", 0, "ranges", 0), [None, ["10"], None], "tasks[0].ranges[0]"),
    (("tasks", 0, "differences", 0), [0, 5], "tasks[0].differences[0]"),
    (("position", "committed", 0), [NODE.hex()], "position.committed[0]"),
    (("broken", 0), ["public"], "broken[0]"),
    # an object instead of a list
    (("tasks",), {"t1": {}}, "tasks"),
    (("tables",), {}, "tables"),
    (("tasks", 0, "done"), {"0": True}, "tasks[0].done"),
    (("tables", 0, "key"), {"id": 1}, "tables[0].key"),
    # a task or a table without fields
    (("tasks", 0), {}, "tasks[0].purpose"),
    (("tasks", 0, "id"), KeyError, "tasks[0].id"),
    (("tables", 0, "columns"), KeyError, "tables[0].columns"),
    (("tasks", 0, "purpose"), "rebuild", "tasks[0].purpose"),
    # done or differing ranges the task does not have
    (("tasks", 0, "done"), [0, 5], "tasks[0]"),
    # a key that is not a column
    (("tables", 0, "key"), ["nope"], "tables[0].key"),
    # a position that does not parse
    (("position",), "0:42", "position"),
    (("position", "partitions"), [], "position.partitions"),
    (("position", "partitions", 0, "next_offset"), "42", "position.partitions[0].next_offset"),
    (("position", "partitions", 0, "publisher"), "not hex", "position.partitions[0].publisher"),
    (("position", "partitions", 0, "epoch"), -1, "position.partitions[0].epoch"),
    (("position", "version"), 99, "position.version"),
    (("position",), KeyError, "position"),
    # the rest
    (("phase",), "loading", "phase"),
    (("snapshot",), "yesterday", "snapshot"),
    (("horizon",), "1:2", "horizon"),
    (("version",), 3, "version"),
    (("tables", 0, "columns", 0, 3), "yes", "tables[0].columns[0][3]"),
]


@pytest.mark.parametrize(("path", "value", "field"), TAMPERED)
def test_a_tampered_document_names_the_field(path: tuple[Any, ...], value: Any, field: str) -> None:
    document = set_at(to_document(STATE), path, value)
    with pytest.raises(StateError, match=re.escape(f"field '{field}'")) as raised:
        from_document(document)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"committed_batches": [12, 13]}, "position.committed_nodes"),
        ({"committed_nodes": "\\x00"}, "position.committed_nodes"),
        ({"publisher": None}, "position.publisher"),
        ({"sequence": "7"}, "position.sequence"),
        ({"tasks": {"a": 1}}, "tasks"),
        ({"tasks": [{"id": "x"}]}, "tasks[0].purpose"),
    ],
)
def test_a_tampered_row_of_the_old_table_names_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(StateError, match=re.escape(f"field '{field}'")):
        from_document(legacy_document(old_row(**changes)))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += paths(value, (*prefix, index))
    return found


@settings(deadline=None, max_examples=300)
@given(st.data())
def test_any_tampering_gives_a_state_or_one_state_error(data: st.DataObject) -> None:
    original = data.draw(st.sampled_from([to_document(STATE), release_02_document()]))
    document = original
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths(document)))
        value = data.draw(st.one_of(json_values, st.just(KeyError)))
        document = set_at(document, path, value)
    try:
        state = from_document(document)
    except StateError as error:
        assert str(error).startswith("field '"), error
        return
    assert isinstance(state, WorkerState)
    # What reads, writes back as a document that reads as the same state.
    assert from_document(json.loads(json.dumps(to_document(state)))) == state
