"""A group rewritten into a new spec's partitions (rows of an older spec: one writer splits them by
partition) buffers no more than one rewritten into its own partition, whatever the partitions: the writer
is given a budget of a quarter of the largest output file (issue: compaction peak RSS <= 2 x target file
size + 300 MB whatever the group; it held up to 512 MiB of rows across partitions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_engine.io.parquet_write as pw
from gpu_engine.execute.rewrite import writer_buffer_bytes
from gpu_engine.io.write_options import WriteOptions
from gpu_engine.tasks import FileGroup

from ..commit._support import sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
TARGET = 100_000
ROW_GROUP = 20_000  # below the quarter file: the budget is a row group


def test_a_repartitioning_rewrite_buffers_one_row_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = {"format-version": "2", "write.parquet.row-group-size-bytes": str(ROW_GROUP)}
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties=props)
    rng = np.random.default_rng(3)
    for _ in range(2):  # incompressible ids
        ids = rng.integers(0, 2**62, 200_000)
        tbl.append(pa.table({"id": ids, "name": [f"n{i % 53}" for i in range(len(ids))]}, schema=SCHEMA))
    with tbl.update_spec() as u:
        u.add_field("bucket(16, id)")
    peaks: list[tuple[float, int]] = []  # (most Arrow bytes buffered, the budget), per writer
    real_add, real_init = pw._Writer.add, pw._Writer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        peaks.append((0.0, self.buffer_limit))

    def add(self: Any, key: tuple[Any, ...], batch: pa.RecordBatch) -> None:
        real_add(self, key, batch)
        peaks[-1] = (max(peaks[-1][0], sum(p.nbytes for p in self.parts.values())), peaks[-1][1])

    monkeypatch.setattr(pw._Writer, "__init__", init)
    monkeypatch.setattr(pw._Writer, "add", add)
    expected = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    result = tbl.compact(options={"rewrite-all": "true", "target-file-size-bytes": str(TARGET)})
    assert result.added_data_files >= 16 and len(peaks) == len(result.groups) == 1
    assert peaks[0][1] == ROW_GROUP and peaks[0][0] <= ROW_GROUP, peaks  # not a row group per partition
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == expected
    assert {f.spec_id for t in tbl.scan().plan().tasks for f in [t.file]} == {1}


def test_the_budget_is_a_quarter_file_and_at_most_a_row_group() -> None:
    def group(largest: int) -> FileGroup:
        return FileGroup(0, None, (), (), (), 0, 1, largest, largest)

    options = WriteOptions()
    assert writer_buffer_bytes(group(16 << 20), options) == 4 << 20
    assert writer_buffer_bytes(group(1 << 30), options) == options.row_group_size_bytes == 128 << 20


@pytest.mark.parametrize("strategy", ["binpack", "sort", "zorder"])
def test_a_repartitioning_rewrite_clusters_rows_by_the_output_partitions(
    tmp_path: Path, strategy: str
) -> None:
    """As Java's rewrite_data_files (a range distribution, or the partition fields before the sort order):
    each partition's rows come together and are written in full row groups. They came in the old layout's
    order, every partition's rows spread over all of it: the shared buffer cut each into row groups of a
    sixteenth of the budget."""
    props = {"format-version": "2", "write.parquet.row-group-size-bytes": str(ROW_GROUP)}
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties=props)
    rng = np.random.default_rng(5)
    for _ in range(2):
        ids = rng.integers(0, 2**62, 100_000)
        tbl.append(pa.table({"id": ids, "name": [f"n{i % 53}" for i in range(len(ids))]}, schema=SCHEMA))
    with tbl.update_spec() as u:
        u.add_field("bucket(16, id)")
    expected = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    order = {"binpack": None, "sort": "name DESC, id", "zorder": "zorder(name, id)"}[strategy]
    kind = "sort" if strategy == "zorder" else strategy
    options = {"rewrite-all": "true", "target-file-size-bytes": str(TARGET)}
    tbl.compact(kind, sort_order=order, options=options)
    files = [t.file for t in tbl.scan().plan().tasks]
    assert {f.spec_id for f in files} == {1} and len(files) >= 16
    # a full row group is ROW_GROUP Arrow bytes, ~1000 of these rows: all but each file's last are full
    # (without the clustering: ~1000 / 16 rows each)
    full = ROW_GROUP / (SCHEMA.empty_table().nbytes + tbl.scan().to_arrow().nbytes / len(expected))
    for f in files:
        md = pq.ParquetFile(tbl.io.resolve(f.path)).metadata
        rows = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
        assert min(rows[:-1], default=full) >= 0.75 * full, (f.path, rows, full)
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == expected
    if strategy == "sort":  # each file in the order asked for
        for f in files:
            names = pq.read_table(tbl.io.resolve(f.path), columns=["name", "id"]).to_pylist()
            assert names == sorted(names, key=lambda r: (_desc(r["name"]), r["id"]))


def _desc(text: str) -> tuple[int, ...]:
    return (*(-b for b in text.encode()), 1)
