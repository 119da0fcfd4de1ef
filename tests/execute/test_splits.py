"""Large files are split into several tasks by row groups; together the tasks read every row exactly once,
with position deletes applied by file position whichever task reads a row."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.execute import scan as scan_module
from gpu_engine.execute.scan import ScanProgress, _pieces
from gpu_engine.execute.stream import ordered
from gpu_engine.execute.task import TaskContext
from gpu_engine.planning.splits import row_group_ranges
from gpu_engine.table import Table
from gpu_engine.tasks import DataFile

from ..planning._support import load
from .gen_table import Kind, generate
from .oracles import assert_same_rows, duckdb_rows

TABLES = [
    # one 20,000-row file in 200 row groups (split offsets recorded), with an Impala-written position delete
    # file (files without split offsets, like dremio's multi_rowgroup_orders_with_deletes, are read whole)
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_lineitem_multiblock",
]


def _with_split_size(tbl: Table, size: int) -> Table:
    md = replace(tbl.metadata, properties={**tbl.metadata.properties, "read.split.target-size": str(size)})
    return Table(identifier=tbl.identifier, metadata=md, metadata_location=tbl.metadata_location, io=tbl.io)


@pytest.mark.parametrize("rel", TABLES)
def test_split_tasks_read_every_row_once(rel: str) -> None:
    _check_splits(load(rel), duckdb_rows(rel), rel)


def test_split_tasks_with_deletion_vectors_and_equality_deletes(tmp_path: Path) -> None:
    kinds: tuple[tuple[Kind, int], ...] = (("dv", 3), ("mixed", 2))
    for kind, version in kinds:
        generated = generate(
            tmp_path / kind,
            kind=kind,
            rows=6000,
            files=3,
            delete_fraction=0.1,
            format_version=version,
            seed=11,
            row_group_rows=250,
        )
        tbl = ge.load_table(generated.metadata_location)
        _check_splits(tbl, generated.expected, kind)


def _check_splits(tbl: Table, expected: pa.Table, what: str) -> None:
    whole = tbl.scan().plan()
    smallest = min(t.file.file_size_in_bytes for t in whole.tasks)
    split = _with_split_size(tbl, max(1, smallest // 8))
    plan = split.scan().plan()
    assert len(plan.tasks) > len(whole.tasks), "the split size did not split any file"
    by_file: dict[str, list[tuple[int, int]]] = {}
    for task in plan.tasks:
        by_file.setdefault(task.file.path, []).append((task.start, task.length))
    assert any(len(ranges) > 1 for ranges in by_file.values())
    actual = split.scan(columns=expected.column_names).to_arrow()
    assert_same_rows(actual, expected, context=f"{what} split into {len(plan.tasks)} tasks")
    positions = split.scan(columns=["_file", "_pos"]).to_arrow()
    pairs = list(
        zip(positions.column("_file").to_pylist(), positions.column("_pos").to_pylist(), strict=True)
    )
    assert len(pairs) == len(set(pairs)) == actual.num_rows


def test_row_group_ranges_cut_a_range_at_the_offsets_inside_it() -> None:
    def data_file(path: str, offsets: tuple[int, ...] | None) -> DataFile:
        return DataFile(path, "PARQUET", 0, (), 100, 1000, 1, split_offsets=offsets)

    f = data_file("a.parquet", (4, 300, 600, 900))
    assert row_group_ranges(f, 0, 1000) == [(0, 300), (300, 300), (600, 300), (900, 100)]
    assert row_group_ranges(f, 300, 600) == [(300, 300), (600, 300)]
    assert row_group_ranges(f, 600, 300) == [(600, 300)]
    assert row_group_ranges(data_file("b.parquet", (4, 900, 300)), 0, 1000) == [(0, 1000)]  # garbage
    assert row_group_ranges(data_file("c.parquet", None), 0, 1000) == [(0, 1000)]


@pytest.mark.parametrize("spare", [1, 4])
def test_one_file_is_read_by_row_groups_on_every_worker(tmp_path: Path, spare: int) -> None:
    """Fewer planned tasks than workers: the tasks' row groups run as pieces side by side; the rows come in
    the same order as with one worker, deletes apply, and progress counts the planned tasks."""
    generated = generate(
        tmp_path, kind="position", rows=6000, files=1, delete_fraction=0.1, format_version=2, seed=5,
        row_group_rows=500,
    )  # fmt: skip
    tbl = ge.load_table(generated.metadata_location)
    plan = tbl.scan().plan()
    workers = len(plan.tasks) + spare
    pieces = _pieces(plan.tasks, workers)
    assert len(pieces) > len(plan.tasks)
    assert sum(p.task.length for p in pieces) == sum(t.length for t in plan.tasks)
    assert [p.last for p in pieces].count(True) == len(plan.tasks)
    columns = [*generated.expected.column_names, "_file", "_pos"]
    one = replace(tbl.scan(columns=columns), workers=1).to_arrow()
    progress = ScanProgress()
    scan = replace(tbl.scan(columns=columns), workers=workers)
    many = pa.Table.from_batches(list(scan.to_batches(progress=progress)), schema=one.schema)
    order = ["_file", "_pos"]
    assert many.select(order).equals(one.select(order))  # the same rows in the same order
    assert_same_rows(many.drop_columns(order), generated.expected, context=f"{workers} workers")
    assert progress.tasks_done == len(plan.tasks)
    assert progress.bytes == sum(t.length for t in plan.tasks)
    assert progress.rows == many.num_rows


def test_pieces_may_run_a_row_group_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece waiting for the consumer after two batches would leave the other workers idle behind the
    first piece: pieces may run a row group's batches ahead (planned tasks two, as before)."""
    generated = generate(
        tmp_path, kind="position", rows=6000, files=1, delete_fraction=0.1, format_version=2, seed=5,
        row_group_rows=3000,
    )  # fmt: skip
    tbl = ge.load_table(generated.metadata_location)
    depths: list[int] = []
    real = ordered

    def recording(*args: Any, depth: int, **kwargs: Any) -> Any:
        depths.append(depth)
        return real(*args, depth=depth, **kwargs)

    monkeypatch.setattr(scan_module, "ordered", recording)
    monkeypatch.setattr(scan_module, "TaskContext", partial(TaskContext, batch_size=500))
    tasks = len(tbl.scan().plan().tasks)
    replace(tbl.scan(), workers=tasks + 1).to_arrow()
    replace(tbl.scan(), workers=tasks).to_arrow()
    assert depths[0] >= 3000 // 500 and depths[1] == 2
