"""write_equality_deletes against independent readers: pyarrow (rows, field ids, Parquet types), PyIceberg's
bucket transform (partition split), hand-computed bounds; and the validation of keys and scope."""

from __future__ import annotations

import datetime as dt
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType

from gpu_engine.errors import SchemaMismatch, UnsupportedFeature
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.equality_delete_write import write_equality_deletes
from gpu_engine.io.fileio import LocalFileIO

F = it.NestedField
IO = LocalFileIO()
SCHEMA = Schema(
    (
        F(1, "id", it.LONG, True),
        F(2, "region", it.STRING),
        F(3, "ts", it.TIMESTAMP),
        F(4, "s", it.StructType((F(5, "x", it.INT), F(6, "y", it.STRING)))),
        F(7, "score", it.DOUBLE),
        F(8, "tags", it.ListType(9, it.STRING)),
    )
)
UNPARTITIONED = PartitionSpec(0)
BY_REGION_BUCKET = PartitionSpec(
    1,
    (PartitionField((2,), 1000, "region", "identity"), PartitionField((1,), 1001, "id_bucket", "bucket[4]")),
)
BY_DAY = PartitionSpec(2, (PartitionField((3,), 1002, "ts_day", "day"),))
VOID = PartitionSpec(3, (PartitionField((3,), 1003, "ts_day", "void"),))


def field_ids(path: str) -> dict[str, int]:
    return {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in pq.ParquetFile(path).schema_arrow}


def test_unpartitioned_keys_nulls_and_full_bounds(tmp_path: Path) -> None:
    long_text = "region-" + "q" * 40  # longer than truncate(16): the bound must be whole
    keys = pa.table(
        {
            "id": pa.array([3, 1, 2], pa.int32()),  # a narrower integer type is accepted
            "region": ["eu", None, long_text],
        }
    )
    props = {"write.metadata.metrics.default": "counts", "write.metadata.metrics.column.region": "none"}
    files = write_equality_deletes(
        IO, str(tmp_path), SCHEMA, UNPARTITIONED, 0, keys, [1, 2], properties=props
    )
    assert len(files) == 1
    f = files[0]
    assert Path(f.path).parent == tmp_path / "data" and f.path.endswith("-deletes.parquet")
    assert (f.content, f.file_format, f.equality_ids, f.spec_id, f.partition) == (2, "PARQUET", (1, 2), 0, ())
    assert f.sort_order_id is None
    assert f.record_count == 3 and f.file_size_in_bytes == Path(f.path).stat().st_size
    table = pq.read_table(f.path)
    assert table.to_pydict() == {"id": [3, 1, 2], "region": ["eu", None, long_text]}
    assert field_ids(f.path) == {"id": 1, "region": 2}
    schema = pq.ParquetFile(f.path).schema_arrow
    assert schema.field("id").type == pa.int64() and not schema.field("id").nullable
    assert pa.types.is_large_string(schema.field("region").type) and schema.field("region").nullable
    # full metrics for the key columns whatever the table's metrics settings say
    assert f.value_counts == {1: 3, 2: 3} and f.null_value_counts == {1: 0, 2: 1}
    assert f.lower_bounds == {1: struct.pack("<q", 1), 2: b"eu"}
    assert f.upper_bounds == {1: struct.pack("<q", 3), 2: long_text.encode()}


def test_split_by_partition_when_keys_hold_every_source(tmp_path: Path) -> None:
    ids = list(range(40))
    regions = ["eu" if i % 3 else "us" for i in ids]
    keys = pa.table({"region": regions, "id": pa.array(ids, pa.int64())})
    files = write_equality_deletes(IO, str(tmp_path), SCHEMA, BY_REGION_BUCKET, 1, keys, [1, 2])
    bucket = BucketTransform(4).transform(LongType())
    expected: dict[tuple[Any, ...], set[int]] = {}
    for i, r in zip(ids, regions, strict=True):
        expected.setdefault((r, bucket(i)), set()).add(i)
    assert {f.partition for f in files} == set(expected)
    for f in files:
        region, b = f.partition
        assert f.spec_id == 1 and f.equality_ids == (1, 2)
        assert Path(f.path).parent == tmp_path / "data" / f"region={region}" / f"id_bucket={b}"
        rows = pq.read_table(f.path).to_pylist()
        assert {r["id"] for r in rows} == expected[(region, b)]
        assert {r["region"] for r in rows} == {region}
        assert f.record_count == len(rows)
    assert sum(f.record_count for f in files) == 40


def test_keys_that_do_not_determine_the_partition_raise(tmp_path: Path) -> None:
    keys = pa.table({"id": pa.array([1], pa.int64())})
    with pytest.raises(
        UnsupportedFeature, match=r"spec 2: its fields ts_day \(day of ts\) use other columns"
    ):
        write_equality_deletes(IO, str(tmp_path), SCHEMA, BY_DAY, 2, keys, [1])
    with pytest.raises(UnsupportedFeature, match="unpartitioned spec"):
        write_equality_deletes(IO, str(tmp_path), SCHEMA, BY_REGION_BUCKET, 1, keys, [1])
    # a spec whose fields are all void partitions nothing: global deletes are fine
    (f,) = write_equality_deletes(IO, str(tmp_path), SCHEMA, VOID, 3, keys, [1])
    assert (f.spec_id, f.partition, f.record_count) == (3, (None,), 1)


def test_partitioned_by_day_with_ts_in_the_keys(tmp_path: Path) -> None:
    t0 = dt.datetime(2024, 1, 1, 23, 59)
    keys = pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([t0, t0 + dt.timedelta(minutes=2)])})
    files = write_equality_deletes(IO, str(tmp_path), SCHEMA, BY_DAY, 2, keys, [1, 3])
    days = (t0.date() - dt.date(1970, 1, 1)).days
    assert sorted((f.partition, f.record_count) for f in files) == [((days,), 1), ((days + 1,), 1)]
    assert {Path(f.path).parent.name for f in files} == {"ts_day=2024-01-01", "ts_day=2024-01-02"}


def test_nested_key_column(tmp_path: Path) -> None:
    keys = pa.table({"s": pa.array([{"x": 1}, {"x": None}, None], pa.struct([("x", pa.int32())]))})
    (f,) = write_equality_deletes(IO, str(tmp_path), SCHEMA, UNPARTITIONED, 0, keys, [5])
    assert f.equality_ids == (5,)
    table = pq.read_table(f.path)
    assert table.column("s").to_pylist() == [{"x": 1}, {"x": None}, None]
    child = pq.ParquetFile(f.path).schema_arrow.field("s").type.field("x")
    assert int(child.metadata[b"PARQUET:field_id"]) == 5
    assert f.null_value_counts == {5: 2} and f.lower_bounds == {5: struct.pack("<i", 1)}


def test_no_rows_writes_nothing(tmp_path: Path) -> None:
    keys = pa.table({"id": pa.array([], pa.int64())})
    assert write_equality_deletes(IO, str(tmp_path), SCHEMA, UNPARTITIONED, 0, keys, [1]) == []


@pytest.mark.parametrize(
    ("keys", "ids", "error", "message"),
    [
        (
            pa.table({"id": [1], "region": ["eu"]}),
            [1],
            SchemaMismatch,
            "column 'region' is not an equality column",
        ),
        (pa.table({"id": [1]}), [1, 2], SchemaMismatch, "equality column 'region' is missing"),
        (
            pa.table({"s": pa.array([{"x": 1, "y": "a"}])}),
            [5],
            SchemaMismatch,
            "column 's.y' is not an equality",
        ),
        (pa.table({"s": pa.array([1])}), [5], SchemaMismatch, "column 's' is int64, the table has a struct"),
        (pa.table({"id": ["1"]}), [1], SchemaMismatch, "column 'id': Arrow type string cannot be written"),
        (pa.table({"id": pa.array([1, None])}), [1], SchemaMismatch, "column 'id' is required but 1"),
        (pa.table({"score": [1.0]}), [7], UnsupportedFeature, "'score' is a double: the spec excludes float"),
        (
            pa.table({"s": pa.array([{"x": 1}])}),
            [4],
            UnsupportedFeature,
            "'s' is a struct<.*>, not a primitive",
        ),
        (pa.table({"tags": [["a"]]}), [9], UnsupportedFeature, "'tags.element' lies inside a list or map"),
        (pa.table({"id": [1]}), [42], SchemaMismatch, "column id 42 is not in schema 0"),
        (pa.table({"id": [1]}), [], SchemaMismatch, "at least one equality column"),
        (pa.table({"id": [1]}), [1, 1], SchemaMismatch, r"equality_ids \[1, 1\] name a column twice"),
    ],
)
def test_bad_keys_raise_naming_the_column(
    tmp_path: Path, keys: pa.Table, ids: list[int], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        write_equality_deletes(IO, str(tmp_path), SCHEMA, UNPARTITIONED, 0, keys, ids)
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
