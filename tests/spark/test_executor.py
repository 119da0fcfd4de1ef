"""What a Python worker of Spark keeps between tasks: the table metadata and the delete files its tasks
load. The mapInArrow bodies run here without Spark, as a worker runs them: one payload after another."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.execute.projection import project
from gpu_engine.io import fileio
from gpu_engine.spark import executor
from gpu_engine.table import Table

from ..commit._support import count_opens, sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _upserted(tmp_path: Path, rounds: int) -> Table:
    """An unpartitioned v2 table whose every commit upserts: every data file gains equality deletes."""
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties={"format-version": "2"})
    rng = np.random.default_rng(7)
    for v in range(rounds):
        ids = rng.choice(50, 15, replace=False)
        tbl.upsert(
            pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * 15, pa.int64())}), on=["id"]
        )
    return tbl


def _payloads(tbl: Table) -> Iterator[pa.RecordBatch]:
    plan = tbl.scan().plan()
    projection = project(tbl.metadata, plan.schema, None)
    for task in plan.tasks:
        payload = executor.ScanPayload(
            tbl.metadata_location, tbl.io, plan.schema.schema_id, task, projection, "cpu"
        )
        yield pa.RecordBatch.from_pydict({"payload": [pickle.dumps(payload)]})


def test_a_worker_reads_each_delete_file_once_across_scan_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _upserted(tmp_path, 6)
    plan = tbl.scan().plan()
    equality = {fileio.local_path(d.path) for t in plan.tasks for d in t.deletes}
    assert len(plan.tasks) >= 5 and len(equality) >= 5
    opened = count_opens(monkeypatch)
    monkeypatch.setattr(executor, "_DELETES", {})
    rows = pa.Table.from_batches(list(executor.scan_batches(_payloads(tbl))))
    assert {p: opened[p] for p in equality} == dict.fromkeys(equality, 1)
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == sorted(
        tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]
    )


def test_the_cache_follows_the_metadata_location(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "_DELETES", {})
    first = executor._delete_cache("s3://b/t/metadata/1.json")
    assert executor._delete_cache("s3://b/t/metadata/1.json") is first
    second = executor._delete_cache("s3://b/t/metadata/2.json")
    assert second is not first and list(executor._DELETES) == ["s3://b/t/metadata/2.json"]
