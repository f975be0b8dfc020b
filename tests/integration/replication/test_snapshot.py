"""Snapshot loads into the PostgreSQL target: consistent, lossless, in parallel key ranges."""

from __future__ import annotations

from typing import Any

import pytest

from pgshovel.replication.worker import Worker

from ._support import (
    ODD_SCHEMA,
    ODD_TABLE,
    create_type_matrix,
    dump,
    ensure_topic,
    worker_configuration,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_snapshot_of_type_matrix_with_odd_names_equals_source(
    spark: Any, make_database: Any, kafka_config: dict[str, str], topic: str
) -> None:
    source, target = make_database("source"), make_database("target")
    set_configuration = create_type_matrix(source, rows=3000)
    ensure_topic(kafka_config, topic)
    worker = Worker(
        "test", "set", set_configuration, worker_configuration(target, kafka_config, topic), spark
    )

    state = worker.run(should_stop=lambda: True)

    assert state.phase == "streaming"
    source_rows = dump(source, ODD_SCHEMA, ODD_TABLE)
    assert len(source_rows) == 3002
    assert dump(target, ODD_SCHEMA, ODD_TABLE) == source_rows
    assert [report.rows for report in worker.load_reports] == [3002]
