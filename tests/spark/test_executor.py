"""What a Python worker of Spark keeps between tasks: the table metadata and the delete files its tasks
load. The mapInArrow bodies run here without Spark, as a worker runs them: one payload after another."""

from __future__ import annotations

import pickle
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import gpu_engine.table
from gpu_engine.errors import GpuEngineError
from gpu_engine.execute.delete_cache import DeleteCache
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
            tbl.metadata_location,
            executor.stamp_of(tbl.metadata),
            tbl.io,
            plan.schema.schema_id,
            task,
            projection,
            "cpu",
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
    monkeypatch.setattr(executor, "_DELETES", DeleteCache())
    rows = pa.Table.from_batches(list(executor.scan_batches(_payloads(tbl))))
    assert {p: opened[p] for p in equality} == dict.fromkeys(equality, 1)
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == sorted(
        tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]
    )


def test_a_worker_keeps_delete_files_across_commits_and_refreshes_what_depends_on_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _upserted(tmp_path, 5)
    monkeypatch.setattr(executor, "_DELETES", DeleteCache())
    list(executor.scan_batches(_payloads(tbl)))
    before = {fileio.local_path(d.path) for t in tbl.scan().plan().tasks for d in t.deletes}
    for v in (10, 11):
        tbl.upsert(
            pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([v, v], pa.int64())}), on=["id"]
        )
    now = {fileio.local_path(d.path) for t in tbl.scan().plan().tasks for d in t.deletes}
    assert before & now and now - before
    opened = count_opens(monkeypatch)
    rows = pa.Table.from_batches(list(executor.scan_batches(_payloads(tbl))))  # a new metadata location
    assert {p: opened[p] for p in now} == {p: int(p not in before) for p in now}
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == sorted(
        tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]
    )
    # equality keys are read per name mapping (files without field ids): another mapping reads them again
    mapping = '[{"field-id": 1, "names": ["id", "key"]}, {"field-id": 2, "names": ["v"]}]'
    tbl.update_properties().set("schema.name-mapping.default", mapping).commit()
    opened = count_opens(monkeypatch)
    list(executor.scan_batches(_payloads(tbl)))
    assert {p: opened[p] for p in now} == dict.fromkeys(now, 1)


def test_a_worker_keeps_the_latest_metadata_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _upserted(tmp_path, 1)
    monkeypatch.setattr(executor, "_METADATA", OrderedDict())
    keys = []
    for v in range(executor._METADATA_KEPT + 2):
        tbl.append(pa.table({"id": pa.array([v], pa.int64()), "v": pa.array([v], pa.int64())}))
        keys.append((tbl.metadata_location, executor.stamp_of(tbl.metadata)))
        assert executor._metadata(*keys[-1], tbl.io).location == tbl.metadata.location
    assert executor._metadata(*keys[2], tbl.io) is executor._metadata(*keys[2], tbl.io)
    assert list(executor._METADATA) == [*keys[3:], keys[2]]


def test_a_table_recreated_at_its_location_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file-system table writes v1.metadata.json again when re-created at its path: the worker must not
    take its cached metadata of the old table for the new one (their partition specs may differ)."""
    monkeypatch.setattr(executor, "_METADATA", OrderedDict())
    tbl = _upserted(tmp_path, 1)
    old = executor._metadata(tbl.metadata_location, executor.stamp_of(tbl.metadata), tbl.io)
    fresh = replace(
        tbl.metadata, table_uuid="another-table", last_updated_ms=tbl.metadata.last_updated_ms + 1
    )
    monkeypatch.setattr(
        gpu_engine.table, "read_metadata", lambda io, location: fresh
    )  # what the path holds now
    assert executor._metadata(tbl.metadata_location, executor.stamp_of(fresh), tbl.io) is fresh
    assert executor._metadata(tbl.metadata_location, executor.stamp_of(old), tbl.io) is old  # still cached
    with pytest.raises(GpuEngineError, match="no longer the file the driver planned with"):
        executor._metadata(tbl.metadata_location, ("yet-another", 1), tbl.io)
