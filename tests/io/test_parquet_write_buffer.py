"""The writer's buffered rows, all partitions together, stay within ``buffer_bytes`` (a compaction into a
new spec's partitions must not hold more than one into a single partition): past it, the fullest
partition is written out as a smaller row group; files still follow the size rules, a partition buffering
alone still fills its row groups, and threads still write what one thread writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_engine.io.parquet_write as pw
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.fileio import LocalFileIO

F = it.NestedField
IO = LocalFileIO()
SCHEMA = Schema((F(1, "id", it.LONG, True), F(2, "name", it.STRING)))
BUCKETS = PartitionSpec(0, (PartitionField((1,), 1000, "b", "bucket[16]"),))
TARGET = 100_000
PROPS = {"write.target-file-size-bytes": str(TARGET), "write.parquet.row-group-size-bytes": "50000"}


def _data(rows: int = 400_000) -> pa.Table:
    rng = np.random.default_rng(21)  # incompressible ids: files roll on their Arrow size
    return pa.table({"id": rng.integers(0, 2**62, rows), "name": [f"n{i % 101}" for i in range(rows)]})


def _buffered_peak(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The Arrow bytes the writer's partitions hold together after each batch it is given (its own
    counts), the most first."""
    peak = [0.0]
    real_add = pw._Writer.add

    def add(self: Any, key: tuple[Any, ...], batch: pa.RecordBatch) -> None:
        real_add(self, key, batch)
        peak[0] = max(peak[0], sum(p.nbytes for p in self.parts.values()))

    monkeypatch.setattr(pw._Writer, "add", add)
    return peak


def _write(
    root: Path, spec: PartitionSpec, data: pa.Table, buffer_bytes: int | None, **kw: Any
) -> list[ContentFile]:
    batches = data.to_batches(max_chunksize=5000)
    return pw.write_data_files(
        IO, str(root), SCHEMA, spec, batches, properties=PROPS, backend="cpu", buffer_bytes=buffer_bytes, **kw
    )


def test_partitions_buffer_within_the_budget_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data()
    peak = _buffered_peak(monkeypatch)
    _write(tmp_path / "default", BUCKETS, data, None)
    unbounded = peak[0]
    budget = 30_000
    assert unbounded > 4 * budget  # sixteen partitions each filling a row group
    peak[0] = 0.0
    files = _write(tmp_path / "budget", BUCKETS, data, budget)
    assert peak[0] <= budget
    assert sorted(i for f in files for i in pq.read_table(f.path).column("id").to_pylist()) == sorted(
        data.column("id").to_pylist()
    )
    by_partition: dict[tuple[Any, ...], list[ContentFile]] = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    assert len(by_partition) == 16 and any(len(v) > 1 for v in by_partition.values())
    for written in by_partition.values():  # the size rule holds: every file but a partition's last
        for f in written[:-1]:
            assert 0.75 * TARGET <= f.file_size_in_bytes <= 1.25 * TARGET, f.file_size_in_bytes


def test_a_partition_buffering_alone_fills_its_row_groups(tmp_path: Path) -> None:
    """A budget below a row group cuts nothing where one partition buffers: the same bytes as without."""
    data = _data(60_000)
    out = {}
    for budget in (None, 1000):
        files = _write(tmp_path / str(budget), PartitionSpec(0), data, budget)
        out[budget] = [(Path(f.path).read_bytes(), f.split_offsets) for f in files]
        assert all(pq.read_metadata(f.path).num_row_groups > 1 for f in files)
    assert out[None] == out[1000]


def test_threads_write_what_one_thread_writes_within_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data(60_000)
    out = {}
    for workers in (1, 3):
        monkeypatch.setattr(pw, "_workers", lambda workers=workers: workers)
        root = tmp_path / str(workers)
        files = _write(root, BUCKETS, data, 30_000)
        out[workers] = [
            (Path(f.path).name[-len("00000.parquet") :], f.partition, Path(f.path).read_bytes())
            for f in files
        ]
    assert len(out[1]) >= 16 and out[1] == out[3]
