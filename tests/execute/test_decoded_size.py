"""The decoded bytes of Parquet row groups, estimated from footers, are near what a decoder makes of them,
where stored and uncompressed bytes are not."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.execute.decoded_size import decoded_bytes, tasks_decoded_bytes

from ..commit._support import sql_catalog

WORDS = [f"category-{k:02d}-" + "abcdefghij" * 3 for k in range(10)]


def _write(path: Path, table: pa.Table, **options: object) -> pq.FileMetaData:
    pq.write_table(table, path, **options)
    return pq.read_metadata(path)


def test_a_few_distinct_long_strings_count_as_decoded_not_as_stored(tmp_path: Path) -> None:
    n = 200_000
    table = pa.table({"s": pa.array([WORDS[i // 1000 % 10] for i in range(n)], pa.string())})
    md = _write(tmp_path / "s.parquet", table)
    decoded = table.nbytes  # 42 bytes and a 4-byte offset a row
    uncompressed = md.row_group(0).total_byte_size  # the dictionary's indexes: a few bits a row
    assert uncompressed * 100 < decoded
    assert 0.9 * decoded <= decoded_bytes(md, [0]) <= 1.1 * decoded


def test_fixed_width_and_nested_columns_and_a_projection(tmp_path: Path) -> None:
    n = 50_000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([i % 7 for i in range(n)], pa.int32()),
            "d": pa.array([float(i % 3) for i in range(n)], pa.float64()),
            "price": pa.array([Decimal(i % 5) for i in range(n)], pa.decimal128(9, 2)),
            "nested": pa.array([{"a": i % 3, "b": WORDS[i % 10]} for i in range(n)]),
            "tags": pa.array([[i % 4, 1] for i in range(n)], pa.list_(pa.int32())),
        }
    )
    path = tmp_path / "t.parquet"
    md = _write(path, table, row_group_size=n // 2)
    assert md.num_row_groups == 2
    arrow = pq.ParquetFile(path).schema_arrow
    for names, expected in [
        (["id"], 8 * n),
        (["x", "d"], 12 * n),
        (["price"], 16 * n),  # stored in 4 bytes, decoded as a 16-byte decimal
        (["nested"], 8 * n + 46 * n),
        (["tags"], 8 * n),  # two int32 values a row (the list's offsets not counted)
    ]:
        got = decoded_bytes(md, range(md.num_row_groups), names, arrow)
        assert expected <= got <= 1.1 * expected, names
    everything = decoded_bytes(md, [0, 1])
    assert everything == decoded_bytes(md, [0, 1], [f.name for f in arrow], arrow)
    assert everything == decoded_bytes(md, [0]) + decoded_bytes(md, [1])
    assert everything > decoded_bytes(md, [0, 1], ["id", "nested"], arrow)


def test_a_file_of_several_tasks_counts_each_row_group_once(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    props = {
        "write.parquet.row-group-size-bytes": "4000",
        "write.parquet.row-group-check-min-record-count": "10",
        "read.split.target-size": "3000",
    }
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties=props)
    for k in range(3):
        ids = range(k * 3000, (k + 1) * 3000)
        tbl.append(pa.table({"id": ids, "s": [WORDS[i % 10] for i in ids]}, schema=schema))
    tasks = tbl.refresh().scan().plan().tasks
    files = {t.file.path for t in tasks}
    assert len(tasks) > len(files) == 3  # files split into several tasks
    whole = 0
    for path in files:
        md = pq.read_metadata(path.removeprefix("file://"))
        whole += decoded_bytes(md, range(md.num_row_groups))
    assert tasks_decoded_bytes(tbl.io, tasks) == tasks_decoded_bytes(tbl.io, tasks, workers=4) == whole
    part = tasks_decoded_bytes(tbl.io, tasks[:1])
    assert 0 < part < whole


@pytest.mark.parametrize("stats", [True, False])
def test_strings_without_statistics_count_their_uncompressed_pages(tmp_path: Path, stats: bool) -> None:
    table = pa.table({"s": pa.array([WORDS[i % 10] for i in range(10_000)])})
    md = _write(tmp_path / "s.parquet", table, write_statistics=stats, use_dictionary=False)
    chunk = md.row_group(0).column(0)
    got = decoded_bytes(md, [0])
    assert got >= chunk.total_uncompressed_size  # plain pages: each value and its length
    assert got <= 1.1 * table.nbytes
