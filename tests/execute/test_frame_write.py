"""write_frame through the pyarrow twin (which encodes as cuDF does: no field ids, every timestamp
flagged UTC, dates as plain INT32): the files read back as the host writer's do, by our reader and
pyarrow, with the same metrics, Parquet types and field ids."""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine._deps import optional
from gpu_engine.errors import SchemaMismatch, UnsupportedFeature
from gpu_engine.execute.frame_write import write_frame
from gpu_engine.execute.frames import ArrowFrames
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.iceberg.sorting import SortField, SortOrder
from gpu_engine.io.arrow_conform import conform_batch, write_schema
from gpu_engine.io.arrow_schema import to_arrow_schema
from gpu_engine.io.parquet_write import write_data_files
from gpu_engine.io.write_options import WriteOptions
from tests.io.test_parquet_write import (
    IO,
    NESTED,
    NESTED_ROWS,
    PRIMITIVE_ROWS,
    PRIMITIVES,
    UNPARTITIONED,
    read_ours,
    write,
)

F = it.NestedField
TWIN = ArrowFrames()
METRICS = (
    "record_count",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
)


def frame_write(
    tmp_path: Path,
    schema: Schema,
    table: pa.Table,
    rows: Sequence[int] | None = None,
    spec: PartitionSpec = UNPARTITIONED,
    partition: tuple[Any, ...] = (),
    sink: Any = TWIN,
    **props: str,
) -> list[ContentFile]:
    properties = {k.replace("__", ".").replace("_", "-"): v for k, v in props.items()}
    return write_frame(
        IO, str(tmp_path / "frames"), schema, spec, partition, table, sink,
        [len(table)] if rows is None else rows, properties=properties,
    )  # fmt: skip


def metrics(f: ContentFile) -> dict[str, Any]:
    return {name: getattr(f, name) for name in METRICS}


def rows_of(table: pa.Table) -> list[Any]:
    """The rows, NaN as a value equal to itself (and -0.0 unlike 0.0)."""

    def key(v: Any) -> Any:
        if isinstance(v, float):
            return ("nan",) if math.isnan(v) else (v, math.copysign(1.0, v))
        return v

    return [{k: key(v) for k, v in row.items()} for row in table.to_pylist()]


def parquet_schema(path: str) -> str:
    """The Parquet schema as text, without the file's name."""
    return re.sub(r"^.*?\n", "", str(pq.ParquetFile(path).schema), count=1)


@pytest.mark.parametrize(
    ("schema", "rows"), [(PRIMITIVES, PRIMITIVE_ROWS), (NESTED, NESTED_ROWS)], ids=["flat", "nested"]
)
def test_files_equal_the_host_writers(tmp_path: Path, schema: Schema, rows: dict[str, list[Any]]) -> None:
    table = pa.table(rows, schema=to_arrow_schema(schema))
    [host] = write(tmp_path / "host", schema, table)
    [got] = frame_write(tmp_path, schema, table)
    assert rows_of(read_ours(got.path, schema)) == rows_of(read_ours(host.path, schema))
    assert rows_of(pq.read_table(got.path)) == rows_of(pq.read_table(host.path))
    assert metrics(got) == metrics(host)
    assert parquet_schema(got.path) == parquet_schema(host.path)  # field ids, logical types, repetition
    assert set(got.column_sizes) == set(host.column_sizes)
    assert got.split_offsets == (4,)
    assert got.file_size_in_bytes == os.path.getsize(got.path)
    assert got.path.startswith(str(tmp_path / "frames" / "data") + "/")


def test_bounds_of_signed_zeros_nans_and_truncated_strings(tmp_path: Path) -> None:
    schema = Schema((
        F(1, "z", it.DOUBLE), F(2, "nz", it.FLOAT), F(3, "nan", it.DOUBLE), F(4, "s", it.STRING),
        F(5, "none", it.LONG), F(6, "counts", it.STRING),
    ))  # fmt: skip
    table = pa.table(
        {
            "z": [0.0, -0.0, None, 1.0],
            "nz": pa.array([-0.0, -0.0, -1.0, None], pa.float32()),
            "nan": [math.nan, math.nan, None, None],
            "s": ["a" * 20, "\U0010ffff" * 17, "b", None],
            "none": [1, 2, 3, 4],
            "counts": ["x", "y", None, "z"],
        },
        schema=to_arrow_schema(schema),
    )
    props = {"write.metadata.metrics.column.none": "none", "write.metadata.metrics.column.counts": "counts"}
    [host] = write_data_files(IO, str(tmp_path / "host"), schema, UNPARTITIONED, table, properties=props)
    [got] = write_frame(IO, str(tmp_path), schema, UNPARTITIONED, (), table, TWIN, [4], properties=props)
    assert metrics(got) == metrics(host)
    assert got.lower_bounds[1] == host.lower_bounds[1] and got.upper_bounds[2] == host.upper_bounds[2]
    assert 5 not in got.value_counts and 6 in got.value_counts and 6 not in got.lower_bounds
    assert got.nan_value_counts[3] == 2 and 3 not in got.lower_bounds


def test_rows_cut_into_files_of_a_partition(tmp_path: Path) -> None:
    schema = Schema((F(1, "id", it.LONG, required=True), F(2, "cat", it.STRING)))
    spec = PartitionSpec(3, (PartitionField((2,), 1000, "cat", "identity"),))
    table = pa.table({"id": list(range(12)), "cat": ["a/b"] * 12}, schema=to_arrow_schema(schema))
    files = frame_write(tmp_path, schema, table, [5, 5, 2], spec, ("a/b",))
    assert [f.record_count for f in files] == [5, 5, 2]
    assert all(f.spec_id == 3 and f.partition == ("a/b",) for f in files)
    assert all("/data/cat=a%2Fb/" in f.path for f in files)
    assert [read_ours(f.path, schema).column("id").to_pylist() for f in files] == [
        list(range(5)), list(range(5, 10)), [10, 11],
    ]  # fmt: skip
    assert [f.lower_bounds[1] for f in files] == [it_long(0), it_long(5), it_long(10)]
    assert len({f.path for f in files}) == 3
    assert not [p for p in Path(tmp_path).rglob("*.tmp")]


def it_long(v: int) -> bytes:
    return v.to_bytes(8, "little", signed=True)


def test_sort_order_and_table_properties(tmp_path: Path) -> None:
    schema = Schema((F(1, "id", it.LONG), F(2, "s", it.STRING)))
    table = pa.table({"id": [3, 1, 2], "s": ["x", "y", "z"]}, schema=to_arrow_schema(schema))
    order = SortOrder(4, (SortField((1,), "identity", "asc", "nulls-first"),))
    files = write_frame(
        IO, str(tmp_path), schema, UNPARTITIONED, (), table, TWIN, [3], sort_order=order,
        properties={"write.parquet.compression-codec": "snappy", "write.metadata.metrics.default": "none"},
    )  # fmt: skip
    assert files[0].sort_order_id == 4
    assert files[0].lower_bounds == {1: it_long(1)}  # the sort column keeps its bounds, others none
    assert pq.ParquetFile(files[0].path).metadata.row_group(0).column(0).compression == "SNAPPY"


def test_row_group_size_from_the_table_properties(tmp_path: Path) -> None:
    schema = Schema((F(1, "id", it.LONG),))
    table = pa.table({"id": list(range(10_000))}, schema=to_arrow_schema(schema))
    [f] = frame_write(tmp_path, schema, table, write__parquet__row_group_size_bytes="16000")
    md = pq.ParquetFile(f.path).metadata
    assert md.num_row_groups == 5
    assert f.split_offsets is not None and len(f.split_offsets) == 5


class Refusing(ArrowFrames):
    def encode_unsupported(self, schema: pa.Schema, options: WriteOptions) -> str | None:
        return f"no {options.compression_codec} here"


class Failing(ArrowFrames):
    """Encodes, then fails on the second file's metrics (after the first was published)."""

    def __init__(self) -> None:
        self.calls = 0

    def leaf_stats(self, column: Any, t: it.PrimitiveType, bounds: bool) -> Any:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("device lost")
        return super().leaf_stats(column, t, bounds)


def test_what_cannot_be_written_is_refused_first(tmp_path: Path) -> None:
    schema = Schema((F(1, "id", it.LONG),))
    table = pa.table({"id": [1, 2]}, schema=to_arrow_schema(schema))
    with pytest.raises(
        UnsupportedFeature, match=r"^arrow cannot write these rows as the table asks: no zstd here$"
    ):
        frame_write(tmp_path, schema, table, sink=Refusing())
    assert not list(tmp_path.rglob("*"))


def test_a_failure_leaves_no_file(tmp_path: Path) -> None:
    schema = Schema((F(1, "id", it.LONG),))
    table = pa.table({"id": [1, 2, 3]}, schema=to_arrow_schema(schema))
    with pytest.raises(RuntimeError, match="device lost"):
        frame_write(tmp_path, schema, table, [1, 1, 1], sink=Failing())
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_rows_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    schema = Schema((F(1, "id", it.LONG, required=True), F(2, "s", it.STRING)))
    table = pa.table({"id": [1, None], "s": ["a", "b"]})
    with pytest.raises(SchemaMismatch, match=r"column 'id' is required but holds 1 null\(s\)"):
        frame_write(tmp_path, schema, table)
    with pytest.raises(SchemaMismatch, match=r"the rows have no column 's'"):
        frame_write(tmp_path, schema, pa.table({"id": [1, 2]}))
    with pytest.raises(ValueError, match=r"file row counts \[1\] do not add up to the frame's 2"):
        frame_write(tmp_path, schema, pa.table({"id": [1, 2], "s": ["a", "b"]}), [1])
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_the_twin_encodes_as_cudf_does(tmp_path: Path) -> None:
    """What the footer fixes are for: the twin's own bytes have no ids, UTC-flagged timestamps, int days."""
    schema = Schema((F(1, "d", it.DATE), F(2, "ts", it.TIMESTAMP)))
    target = write_schema(schema)
    table = pa.table(
        {"d": pa.array([1], pa.date32()), "ts": pa.array([2], pa.timestamp("us"))}, schema=target
    )
    path = str(tmp_path / "raw.parquet")
    TWIN.encode(table, target, [path], [1], WriteOptions())
    got = pq.ParquetFile(path).schema_arrow
    assert [f.type for f in got] == [pa.int32(), pa.timestamp("us", "UTC")]
    assert all(f.metadata is None for f in got)


# -- cuDF (GPU machines) ---------------------------------------------------------------------------------

CUDF_COLUMNS = [f.name for f in PRIMITIVES.fields if f.name not in ("time", "uuid", "fixed", "bin", "dec30")]


@pytest.mark.gpu
@pytest.mark.parametrize("files", [[3], [2, 1]], ids=["one-file", "two-files"])
def test_cudf_writes_what_the_host_writer_writes(tmp_path: Path, files: list[int]) -> None:
    cudf = optional("cudf")
    if cudf is None:
        pytest.skip("cuDF is not installed")
    from gpu_engine.backend.cudf_sink import CudfSink

    schema = Schema(tuple(f for f in PRIMITIVES.fields if f.name in CUDF_COLUMNS))
    table = pa.table({c: PRIMITIVE_ROWS[c] for c in CUDF_COLUMNS}, schema=to_arrow_schema(schema))
    got = frame_write(tmp_path, schema, cudf.DataFrame.from_arrow(table), files, sink=CudfSink())
    assert [f.record_count for f in got] == files
    start = 0
    for f, n in zip(got, files, strict=True):
        [host] = write(tmp_path / f"host{start}", schema, table.slice(start, n))
        start += n
        assert rows_of(read_ours(f.path, schema)) == rows_of(read_ours(host.path, schema))
        got_schema, host_schema = parquet_schema(f.path), parquet_schema(host.path)
        assert got_schema == host_schema, f"cuDF's file:\n{got_schema}\nthe host's:\n{host_schema}"
        assert metrics(f) == metrics(host)


def _double(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


@pytest.mark.parametrize("library", ["arrow", pytest.param("cudf", marks=pytest.mark.gpu)])
def test_every_zero_and_nan_kept_and_compressed(tmp_path: Path, library: str) -> None:
    sink: Any = TWIN
    frame: Any = pa.table
    if library == "cudf":
        cudf = optional("cudf")
        if cudf is None:
            pytest.skip("cuDF is not installed")
        from gpu_engine.backend.cudf_sink import CudfSink

        sink, frame = CudfSink(), lambda t: cudf.DataFrame.from_arrow(t)
    # a dictionary keyed by value merges -0.0 with 0.0 and every NaN: each row must keep its own bits
    values = [0.0, -0.0, _double(0x7FF8000000000000), _double(0xFFF8000000000001), 1.5] * 2000
    schema = Schema((F(1, "v", it.DOUBLE),))
    table = pa.table({"v": values}, schema=to_arrow_schema(schema))
    [got] = frame_write(tmp_path, schema, frame(table), sink=sink)
    read = pq.read_table(got.path).column("v").to_numpy().view("<u8")
    assert read.tolist() == np.asarray(values).view("<u8").tolist()
    # 80,000 bytes PLAIN, one 40-byte pattern repeated: smaller compressed, so ZSTD-compressed
    assert pq.ParquetFile(got.path).metadata.row_group(0).column(0).compression == "ZSTD"


@pytest.mark.gpu
def test_cudf_refuses_what_it_cannot_write_as_asked(tmp_path: Path) -> None:
    cudf = optional("cudf")
    if cudf is None:
        pytest.skip("cuDF is not installed")
    from gpu_engine.backend.cudf_sink import CudfSink

    schema = Schema(tuple(f for f in PRIMITIVES.fields if f.name in ("long", "dec30")))
    table = pa.table({c: PRIMITIVE_ROWS[c] for c in ("long", "dec30")}, schema=to_arrow_schema(schema))
    with pytest.raises(
        UnsupportedFeature, match=r"column 'dec30' \(decimal128\(30, 4\)\): cuDF writes it in 16"
    ):
        frame_write(tmp_path, schema, cudf.DataFrame.from_arrow(table), sink=CudfSink())


def test_nested_uuids_without_elements_and_unstored_schemas(tmp_path: Path) -> None:
    schema = Schema((F(1, "m", it.MapType(2, it.UUID, 3, it.LONG)),))
    table = pa.table({"m": pa.array([None, None], pa.map_(pa.binary(16), pa.int64()))})
    [host] = write(tmp_path / "host", schema, table)
    frame = pa.Table.from_batches([conform_batch(table.to_batches()[0], schema, write_schema(schema))])
    [got] = frame_write(tmp_path, schema, frame)
    assert metrics(got) == metrics(host) and got.value_counts == {2: 0, 3: 0}
    unknown = Schema((F(1, "u", it.UNKNOWN),))
    with pytest.raises(UnsupportedFeature, match=r"its rows cannot be written"):
        frame_write(tmp_path, unknown, pa.table({"u": pa.nulls(2)}))
