"""The Delta target's ``history`` option: the SCD2 history the worker writes beside a copy.

Real delta-rs tables in a temporary directory, micro-batches planned from
protobuf mutations as the worker plans them (helpers of ``test_table_targets``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.config import parse_configuration
from pgshovel.replication.tables._history import END_TXID, START_TXID
from pgshovel.replication.targets.delta import DeltaTarget
from pgshovel.source import Column, TableShape
from pgshovel.stream.shapes import shape_to_proto
from pgshovel.stream.state import WorkerState
from tests._positions import after
from tests.unit.replication.test_table_targets import BASE, ID, Op, T, U, apply, mutation, rows

B = Column("b", "bigint", "int8", False, 3)


def tx(txid: int, message: stream_pb2.Mutation) -> stream_pb2.Mutation:
    message.transaction = txid
    return message


def target(root: Path, history: Any = True) -> DeltaTarget:
    made = DeltaTarget(str(root), history=history)
    assert made.open("c", "s") is None
    snapshot = WorkerState("snapshot", "100:100:", after(0), (T, U))
    made.begin_snapshot(snapshot)
    made.finish_snapshot(snapshot.replace(phase="streaming"))
    return made


def versions(made: DeltaTarget, shape: TableShape, *extra: str) -> list[tuple[Any, ...]]:
    table = DeltaTable(f"{made.tables.path(shape)}~history").to_pyarrow_table()
    names = ["id", "a", *extra, START_TXID, END_TXID]
    return sorted(
        zip(*(table.column(name).to_pylist() for name in names), strict=True),
        key=lambda row: (row[0], row[-2]),
    )


def test_each_micro_batch_closes_and_opens_versions_truncate_included(tmp_path: Path) -> None:
    made = target(tmp_path)
    tables = apply(
        made,
        1,
        (T, U),
        tx(10, mutation("t", Op.INSERT, new=1, a="a")),
        tx(10, mutation("t", Op.INSERT, new=2, a="b")),
        tx(11, mutation("t", Op.INSERT, new=3, a="c")),
    )
    tables = apply(
        made,
        2,
        tables,
        tx(12, mutation("t", Op.UPDATE, old=1, new=1, a="a2")),
        tx(13, mutation("t", Op.UPDATE, old=1, new=1, a="a3")),  # folds into one version
        tx(14, mutation("t", Op.UPDATE, old=2, new=20, a="b2")),  # key change
        tx(15, mutation("t", Op.DELETE, old=3)),
    )
    assert versions(made, T) == [
        (1, "a", 10, 13),
        (1, "a3", 13, None),
        (2, "b", 10, 14),
        (3, "c", 11, 15),
        (20, "b2", 14, None),
    ]
    apply(
        made,
        3,
        tables,
        tx(16, mutation("t", Op.TRUNCATE)),
        tx(16, mutation("t", Op.INSERT, new=5, a="e")),
    )
    current = [row for row in versions(made, T) if row[-1] is None]
    assert current == [(5, "e", 16, None)]
    assert [row for row in versions(made, T) if row[0] in (1, 20)][-1] == (20, "b2", 14, 16)
    assert rows(made, T) == [(5, "e")]
    assert made.counter(T) == 4
    made.close()


def test_a_crash_between_the_table_and_its_history_is_recovered_once(tmp_path: Path) -> None:
    made = target(tmp_path)
    tables = apply(made, 1, (T, U), tx(10, mutation("t", Op.INSERT, new=1, a="a")))
    histories = made._histories
    assert histories is not None
    commit = histories.commit

    def crash(*args: Any) -> Any:
        raise KeyboardInterrupt("killed after the table's commit")

    histories.commit = crash  # type: ignore[method-assign,assignment]
    with pytest.raises(KeyboardInterrupt):
        apply(made, 2, tables, tx(11, mutation("t", Op.UPDATE, old=1, new=1, a="b")))
    histories.commit = commit  # type: ignore[method-assign]
    made.close()
    assert rows(made, T) == [(1, "b")], "the table committed, its history did not"
    reopened = DeltaTarget(str(tmp_path), history=True)
    stored = reopened.open("c", "s")
    assert stored is not None and stored.position == after(2)
    assert versions(reopened, T) == [(1, "a", 10, 11), (1, "b", 11, None)]
    assert reopened.counter(T) == 3
    reopened.close()
    again = DeltaTarget(str(tmp_path), history=True)
    again.open("c", "s")  # nothing left to recover: the history is not written twice
    assert versions(again, T) == [(1, "a", 10, 11), (1, "b", 11, None)]
    again.close()


def test_a_reload_closes_every_current_version_at_its_horizon(tmp_path: Path) -> None:
    made = target(tmp_path)
    apply(made, 1, (T, U), tx(10, mutation("t", Op.INSERT, new=1, a="a")))
    reload = WorkerState("snapshot", "200:230:", after(5), (T, U))
    made.begin_snapshot(reload)  # the source is empty now: nothing is opened
    made.finish_snapshot(reload.replace(phase="streaming"))
    assert versions(made, T) == [(1, "a", 10, 230)]
    made.close()


def test_add_column_evolves_the_history_and_a_type_change_stops(tmp_path: Path) -> None:
    made = target(tmp_path, ["public.t"])
    tables = apply(made, 1, (T, U), tx(10, mutation("t", Op.INSERT, new=1, a="a")))
    wider = TableShape("public", "t", (ID, T.columns[1], B), ("id",), relation=10)
    change = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ALTER, schema="public", table="t", relation=10
    )
    change.shape.CopyFrom(shape_to_proto(wider))
    tables = apply(made, 2, tables, change, tx(11, mutation("t", Op.INSERT, new=2, a="b", b=7)))
    assert versions(made, wider, "b") == [(1, "a", None, 10, None), (2, "b", 7, 11, None)]
    assert not Path(f"{made.tables.path(U)}~history").exists(), "u keeps no history"
    narrower = TableShape(
        "public",
        "t",
        (ID, T.columns[1], Column("b", "integer", "int4", False, 3)),
        ("id",),
        relation=10,
    )
    change = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ALTER, schema="public", table="t", relation=10
    )
    change.shape.CopyFrom(shape_to_proto(narrower))
    with pytest.raises(SchemaError, match=r"public.t.*history cannot follow.*reload"):
        apply(made, 3, tables, change, tx(12, mutation("t", Op.INSERT, new=3, a="c", b=1)))
    made.close()


def test_history_names_a_table_of_the_set_and_iceberg_refuses_it(tmp_path: Path) -> None:
    made = DeltaTarget(str(tmp_path), history=["public.nope"])
    made.open("c", "s")
    with pytest.raises(ConfigurationError) as raised:
        made.begin_snapshot(WorkerState("snapshot", "100:100:", after(0), (T, U)))
    assert "'public.nope'" in str(raised.value) and "\n" not in str(raised.value)
    made.close()
    configured = parse_configuration(
        {**BASE, "target": {"type": "delta", "path": str(tmp_path), "history": ["public.t"]}}, "r"
    )
    assert isinstance(configured.target, DeltaTarget)
    assert configured.target.history == ["public.t"]
    iceberg = {"type": "iceberg", "warehouse": str(tmp_path), "history": True}
    with pytest.raises(ConfigurationError) as raised:
        parse_configuration({**BASE, "target": iceberg}, "replication.yml")
    assert "type: delta" in str(raised.value) and "\n" not in str(raised.value)
