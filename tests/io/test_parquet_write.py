"""write_data_files against independent readers: pyarrow (values, Parquet schema, footer), DuckDB (values
and logical types), PyIceberg (metrics from the footer, partition transforms and paths), hand values."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import struct
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.partitioning import PartitionField as PyPartitionField
from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
from pyiceberg.schema import Schema as PySchema
from pyiceberg.transforms import parse_transform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType

from gpu_engine.errors import InvalidProperty, SchemaMismatch, UnsupportedFeature
from gpu_engine.iceberg import serde
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema, schema_to_json
from gpu_engine.io.arrow_schema import field_id_of, to_arrow_schema
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.parquet_read import ParquetSource
from gpu_engine.io.parquet_write import write_data_files
from gpu_engine.io.partition_split import partition_path
from gpu_engine.io.thrift_compact import Struct, decode_struct
from gpu_engine.io.write_options import WriteOptions

F = it.NestedField
IO = LocalFileIO()
UNPARTITIONED = PartitionSpec(0)
UTC = dt.UTC

PRIMITIVES = Schema(
    (
        F(1, "bool", it.BOOLEAN),
        F(2, "int", it.INT),
        F(3, "long", it.LONG, True),
        F(4, "float", it.FLOAT),
        F(5, "double", it.DOUBLE),
        F(6, "dec9", it.decimal(9, 2)),
        F(7, "dec18", it.decimal(18, 3)),
        F(8, "dec30", it.decimal(30, 4)),
        F(9, "date", it.DATE),
        F(10, "time", it.TIME),
        F(11, "ts", it.TIMESTAMP),
        F(12, "tstz", it.TIMESTAMPTZ),
        F(13, "ts_ns", it.TIMESTAMP_NS),
        F(14, "tstz_ns", it.TIMESTAMPTZ_NS),
        F(15, "str", it.STRING),
        F(16, "uuid", it.UUID),
        F(17, "fixed", it.fixed(3)),
        F(18, "bin", it.BINARY),
    )
)
U = [uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), uuid.UUID("0000000a-0000-0000-8000-00000000000b")]
PRIMITIVE_ROWS: dict[str, list[Any]] = {
    "bool": [True, None, False],
    "int": [-(2**31), 7, None],
    "long": [2**62, -1, 0],
    "float": [1.5, None, -0.0],
    "double": [math.nan, -2.25, None],
    "dec9": [Decimal("1234567.89"), None, Decimal("-0.01")],
    "dec18": [Decimal("-123456789012345.678"), Decimal("0.000"), None],
    "dec30": [None, Decimal("12345678901234567890123456.7891"), Decimal("-1.0000")],
    "date": [dt.date(1970, 1, 1), dt.date(2024, 2, 29), None],
    "time": [dt.time(0, 0), None, dt.time(23, 59, 59, 999999)],
    "ts": [dt.datetime(2024, 1, 1, 12, 30, 0, 123456), None, dt.datetime(1900, 1, 1)],
    "tstz": [None, dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)],
    "ts_ns": [
        pa.scalar(1_700_000_000_123_456_789, pa.timestamp("ns")),
        None,
        pa.scalar(-1, pa.timestamp("ns")),
    ],
    "tstz_ns": [pa.scalar(5, pa.timestamp("ns", "UTC")), pa.scalar(6, pa.timestamp("ns", "UTC")), None],
    "str": ["h\u00e9llo", "", None],
    "uuid": [U[0].bytes, None, U[1].bytes],
    "fixed": [b"abc", b"\x00\x00\xff", None],
    "bin": [b"", None, b"\x00\xff" * 20],
}


def primitive_table() -> pa.Table:
    return pa.table(PRIMITIVE_ROWS, schema=to_arrow_schema(PRIMITIVES))


def write(
    tmp_path: Path, schema: Schema, data: Any, spec: PartitionSpec = UNPARTITIONED, **props: str
) -> list[ContentFile]:
    properties = {k.replace("__", ".").replace("_", "-"): v for k, v in props.items()}
    return write_data_files(IO, str(tmp_path), schema, spec, data, properties=properties, backend="cpu")


def read_ours(path: str, schema: Schema) -> pa.Table:
    with ParquetSource.open(IO, path) as src:
        return pa.Table.from_batches([b.batch for b in src.batches(schema)], schema=to_arrow_schema(schema))


def pyiceberg_schema(schema: Schema) -> PySchema:
    return PySchema.model_validate_json(json.dumps(schema_to_json(schema)))


def same(a: list[Any], b: list[Any]) -> bool:
    """Equal value lists, NaN equal to NaN and -0.0 distinct from 0.0."""

    def key(v: Any) -> Any:
        return (
            ("nan",)
            if isinstance(v, float) and math.isnan(v)
            else (v, math.copysign(1, v))
            if isinstance(v, float)
            else v
        )

    return [key(v) for v in a] == [key(v) for v in b]


# -- types and layout ------------------------------------------------------------------------------------


def test_every_primitive_round_trips(tmp_path: Path):
    table = primitive_table()
    [f] = write(tmp_path, PRIMITIVES, table)
    assert f.record_count == 3 and f.file_format == "PARQUET" and f.spec_id == 0 and f.partition == ()
    ours = read_ours(f.path, PRIMITIVES)
    theirs = pq.read_table(f.path)
    for name in table.column_names:
        expected = table.column(name).to_pylist()
        assert same(ours.column(name).to_pylist(), expected), name
        got = theirs.column(name)
        if isinstance(got.type, pa.BaseExtensionType):
            got = pa.chunked_array([c.storage for c in got.chunks])
        assert same(pc.cast(got, table.column(name).type).to_pylist(), expected), name


def test_parquet_types_and_field_ids(tmp_path: Path):
    [f] = write(tmp_path, PRIMITIVES, primitive_table())
    pf = pq.ParquetFile(f.path)
    columns = {pf.schema.column(i).name: pf.schema.column(i) for i in range(len(pf.schema))}
    expected = {  # Appendix A
        "bool": ("BOOLEAN", "None"),
        "int": ("INT32", "None"),
        "long": ("INT64", "None"),
        "float": ("FLOAT", "None"),
        "double": ("DOUBLE", "None"),
        "dec9": ("INT32", "Decimal(precision=9, scale=2)"),
        "dec18": ("INT64", "Decimal(precision=18, scale=3)"),
        "dec30": ("FIXED_LEN_BYTE_ARRAY", "Decimal(precision=30, scale=4)"),
        "date": ("INT32", "Date"),
        "time": ("INT64", "Time(isAdjustedToUTC=false, timeUnit=microseconds)"),
        "str": ("BYTE_ARRAY", "String"),
        "uuid": ("FIXED_LEN_BYTE_ARRAY", "UUID"),
        "fixed": ("FIXED_LEN_BYTE_ARRAY", "None"),
        "bin": ("BYTE_ARRAY", "None"),
    }
    for name, (physical, logical) in expected.items():
        assert (columns[name].physical_type, str(columns[name].logical_type)) == (physical, logical), name
    assert columns["dec30"].length == 13 and columns["uuid"].length == 16 and columns["fixed"].length == 3
    for name, unit, utc in [("ts", "micro", "false"), ("tstz", "micro", "true"), ("ts_ns", "nano", "false")]:
        logical = str(columns[name].logical_type)
        assert f"isAdjustedToUTC={utc}" in logical and f"timeUnit={unit}seconds" in logical, name
    text = str(pf.schema)  # every column carries its field id
    ids = {m.group(2): int(m.group(1)) for m in re.finditer(r"field_id=(-?\d+) (\w+)", text)}
    assert ids == {"schema": -1} | {f.name: f.field_id for f in PRIMITIVES.fields}


NESTED = Schema(
    (
        F(1, "id", it.LONG, True),
        F(
            2,
            "s",
            it.StructType((F(3, "a", it.INT, True), F(4, "t", it.StructType((F(5, "b", it.STRING),))))),
        ),
        F(6, "l", it.ListType(7, it.DOUBLE, element_required=False)),
        F(8, "m", it.MapType(9, it.STRING, 10, it.ListType(11, it.LONG, True))),
        F(12, "ls", it.ListType(13, it.StructType((F(14, "x", it.DATE),)), True)),
    )
)
NESTED_ROWS: dict[str, list[Any]] = {
    "id": [1, 2, 3],
    "s": [{"a": 1, "t": {"b": "x"}}, None, {"a": 3, "t": None}],
    "l": [[1.0, None], [], None],
    "m": [[("k", [1, 2])], None, [("a", None), ("b", [])]],
    "ls": [[{"x": dt.date(2020, 1, 1)}, {"x": None}], None, []],
}


def test_nested_round_trip_and_field_ids(tmp_path: Path):
    table = pa.table(NESTED_ROWS, schema=to_arrow_schema(NESTED))
    [f] = write(tmp_path, NESTED, table)
    assert read_ours(f.path, NESTED).to_pylist() == table.to_pylist()
    assert pq.read_table(f.path).to_pylist() == table.to_pylist()
    text = str(pq.ParquetFile(f.path).schema)
    ids = sorted(int(i) for i in re.findall(r"field_id=(\d+)", text))
    assert ids == sorted(NESTED.by_id)  # every field, element, key and value; 3-level list/map groups
    assert re.search(r"repeated group field_id=-1 list \{\s+optional double field_id=7 element", text)
    assert re.search(r"repeated group field_id=-1 key_value \{\s+required binary field_id=9 key", text)

    def ids_of(fields: Any) -> list[int | None]:
        out = []
        for fld in fields:
            out.append(field_id_of(fld))
            t = fld.type
            children = (
                [t.key_field, t.item_field]
                if pa.types.is_map(t)
                else ([t.value_field] if pa.types.is_list(t) else list(t) if pa.types.is_struct(t) else [])
            )
            out += ids_of(children)
        return out

    assert sorted(i or -1 for i in ids_of(pq.ParquetFile(f.path).schema_arrow)) == sorted(NESTED.by_id)


def test_duckdb_reads_the_logical_types(tmp_path: Path):
    table = primitive_table()
    [f] = write(tmp_path, PRIMITIVES, table)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rel = con.sql(f"SELECT * FROM read_parquet('{f.path}')")
    types = dict(zip(rel.columns, [str(t) for t in rel.types], strict=True))
    # TIMESTAMPTZ values come back as epoch microseconds (DuckDB's Python conversion needs pytz)
    rel = con.sql(f"SELECT * EXCLUDE (tstz, tstz_ns), epoch_us(tstz) AS tstz FROM read_parquet('{f.path}')")
    assert types == {
        "bool": "BOOLEAN", "int": "INTEGER", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE",
        "dec9": "DECIMAL(9,2)", "dec18": "DECIMAL(18,3)", "dec30": "DECIMAL(30,4)", "date": "DATE",
        "time": "TIME", "ts": "TIMESTAMP", "tstz": "TIMESTAMP WITH TIME ZONE", "ts_ns": "TIMESTAMP_NS",
        "tstz_ns": "TIMESTAMP WITH TIME ZONE", "str": "VARCHAR", "uuid": "UUID", "fixed": "BLOB",
        "bin": "BLOB",
    }  # fmt: skip
    rows = rel.fetchall()
    for i, name in enumerate(rel.columns):
        got = [r[i] for r in rows]
        if name in ("ts_ns", "tstz_ns"):
            continue  # DuckDB's Python values stop at microseconds; checked through pyarrow above
        expected = table.column(name).to_pylist()
        if name == "tstz":
            expected = [None if v is None else physical(v) for v in expected]
        if name == "uuid":
            expected = [None if v is None else uuid.UUID(bytes=v) for v in expected]
        if name == "float":
            got = [None if v is None else struct.unpack("<f", struct.pack("<f", v))[0] for v in got]
        assert same(got, expected), name


# -- metrics ---------------------------------------------------------------------------------------------


def reference_bounds(t: it.PrimitiveType, values: list[Any]) -> tuple[bytes, bytes] | None:
    """min/max by Python's ordering of the Iceberg physical values (computed here from the Python
    values), serialized: the full bounds."""
    vals = [physical(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return None

    def key(v: Any) -> Any:
        return (v, math.copysign(1, v)) if isinstance(v, float) else v

    return serde.to_bytes(t, min(vals, key=key)), serde.to_bytes(t, max(vals, key=key))


def physical(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        epoch = dt.datetime(1970, 1, 1, tzinfo=v.tzinfo)
        return (v - epoch) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    if isinstance(v, dt.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 10**6 + v.microsecond
    if isinstance(v, pa.Scalar):
        return v.value  # nanosecond timestamps
    return v


def test_metrics_equal_an_independent_computation(tmp_path: Path):
    table = primitive_table()
    [f] = write(tmp_path, PRIMITIVES, table, write__metadata__metrics__default="full")
    for fld in PRIMITIVES.fields:
        values = PRIMITIVE_ROWS[fld.name]
        assert isinstance(fld.type, it.PrimitiveType)
        assert f.value_counts[fld.field_id] == len(values)
        assert f.null_value_counts[fld.field_id] == sum(v is None for v in values)
        bounds = reference_bounds(fld.type, values)
        got = (f.lower_bounds.get(fld.field_id), f.upper_bounds.get(fld.field_id))
        assert got == (bounds or (None, None)), fld.name
    assert f.nan_value_counts == {4: 0, 5: 1}
    assert f.lower_bounds[4] == struct.pack("<f", -0.0)  # -0.0 < 1.5, and never NaN
    assert f.upper_bounds[5] == f.lower_bounds[5] == struct.pack("<d", -2.25)


def test_metrics_equal_pyiceberg_from_the_footer(tmp_path: Path):
    table = primitive_table()
    [f] = write(tmp_path, PRIMITIVES, table)
    schema = pyiceberg_schema(PRIMITIVES)
    md = pq.read_metadata(f.path)
    ref = data_file_statistics_from_parquet_metadata(
        md, compute_statistics_plan(schema, {}), parquet_path_to_id_mapping(schema)
    )
    assert ref.record_count == f.record_count
    assert ref.value_counts == f.value_counts
    assert ref.null_value_counts == f.null_value_counts
    assert ref.column_sizes == f.column_sizes
    assert tuple(ref.split_offsets) == f.split_offsets
    assert ref.nan_value_counts == {}  # PyIceberg does not count NaNs (the footer has no such count)
    for fid, agg in ref.column_aggregates.items():
        if fid in (13, 14):  # PyIceberg reads nanosecond statistics as microsecond datetimes: loses them
            continue
        if fid == 18:  # PyIceberg's binary upper bound keeps the 0xFF bytes after the incremented one
            assert (
                agg.max_as_bytes() == b"\x00\xff" * 7 + b"\x01\xff"
                and f.upper_bounds[18] == b"\x00\xff" * 7 + b"\x01"
            )
            continue
        assert agg.min_as_bytes() == f.lower_bounds.get(fid), fid
        assert agg.max_as_bytes() == f.upper_bounds.get(fid), fid
    assert f.lower_bounds[13] == struct.pack("<q", -1) and f.upper_bounds[14] == struct.pack("<q", 6)


def test_metric_modes_per_column(tmp_path: Path):
    schema = Schema((F(1, "s", it.STRING), F(2, "b", it.BINARY), F(3, "n", it.LONG), F(4, "d", it.DOUBLE)))
    data = pa.table(
        {"s": ["abcdef", "abzz"], "b": [b"\x01\xff\xff", b"\x00"], "n": [5, 9], "d": [math.nan, 2.0]},
        schema=to_arrow_schema(schema),
    )
    props = {
        "write.metadata.metrics.default": "truncate(2)",
        "write.metadata.metrics.column.b": "full",
        "write.metadata.metrics.column.n": "none",
        "write.metadata.metrics.column.d": "counts",
    }
    [f] = write_data_files(IO, str(tmp_path), schema, UNPARTITIONED, data, properties=props)
    assert f.lower_bounds == {1: b"ab", 2: b"\x00"}
    assert f.upper_bounds == {1: b"ac", 2: b"\x01\xff\xff"}
    assert f.value_counts == {1: 2, 2: 2, 4: 2} and f.nan_value_counts == {4: 1}
    assert set(f.column_sizes) == {1, 2, 4}  # "none" drops the column size too (as Iceberg Java)
    ref = data_file_statistics_from_parquet_metadata(
        pq.read_metadata(f.path), compute_statistics_plan(pyiceberg_schema(schema), props),
        parquet_path_to_id_mapping(pyiceberg_schema(schema)),
    )  # fmt: skip
    assert ref.value_counts == f.value_counts and set(ref.column_sizes) == {
        1,
        2,
        3,
        4,
    }  # PyIceberg keeps sizes
    assert {k: v.min_as_bytes() for k, v in ref.column_aggregates.items()} == f.lower_bounds
    assert {k: v.max_as_bytes() for k, v in ref.column_aggregates.items()} == f.upper_bounds


def test_nested_metrics_against_pyiceberg(tmp_path: Path):
    table = pa.table(NESTED_ROWS, schema=to_arrow_schema(NESTED))
    [f] = write(tmp_path, NESTED, table)
    ref = data_file_statistics_from_parquet_metadata(
        pq.read_metadata(f.path), compute_statistics_plan(pyiceberg_schema(NESTED), {}),
        parquet_path_to_id_mapping(pyiceberg_schema(NESTED)),
    )  # fmt: skip
    assert ref.column_sizes == f.column_sizes
    # struct fields agree; Parquet's counts (PyIceberg, Java) add a value per null or empty list/map
    for fid in (1, 3, 5):
        assert (ref.value_counts[fid], ref.null_value_counts[fid]) == (
            f.value_counts[fid],
            f.null_value_counts[fid],
        )
    assert {k: f.value_counts[k] for k in (7, 9, 11, 14)} == {7: 2, 9: 3, 11: 2, 14: 2}
    assert {k: f.null_value_counts[k] for k in (7, 9, 11, 14)} == {7: 1, 9: 0, 11: 0, 14: 1}
    assert {k: ref.value_counts[k] for k in (7, 9, 14)} == {7: 4, 9: 4, 14: 4}
    # bounds for fields nested in structs only (PyIceberg keeps none for any nested field)
    assert set(f.lower_bounds) == set(f.upper_bounds) == {1, 3, 5}
    assert (f.lower_bounds[5], f.upper_bounds[5]) == (b"x", b"x")
    assert set(ref.column_aggregates) == {1}


def test_offsets_sizes_and_counts_from_the_footer(tmp_path: Path):
    schema = Schema((F(1, "id", it.LONG, True), F(2, "s", it.STRING)))
    n = 20_000
    data = pa.table({"id": pa.array(range(n), pa.int64()), "s": [f"value-{i % 777}" for i in range(n)]})
    [f] = write(tmp_path, schema, data, write__parquet__row_group_size_bytes=str(64 << 10))
    md = pq.read_metadata(f.path)
    assert md.num_row_groups > 3
    starts = []
    for g in range(md.num_row_groups):
        col = md.row_group(g).column(0)
        starts.append(col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset)
    assert f.split_offsets == tuple(starts)
    with ParquetSource.open(IO, f.path) as src:
        assert [src.row_groups_in(o, 1) for o in starts] == [[g] for g in range(md.num_row_groups)]
    sizes = {1: 0, 2: 0}
    for g in range(md.num_row_groups):
        for c in range(2):
            sizes[c + 1] += md.row_group(g).column(c).total_compressed_size
    assert f.column_sizes == sizes
    assert f.file_size_in_bytes == os.path.getsize(f.path) and f.record_count == n
    assert f.lower_bounds == {1: struct.pack("<q", 0), 2: b"value-0"}
    assert f.upper_bounds == {1: struct.pack("<q", n - 1), 2: b"value-99"}


# -- schema checks ---------------------------------------------------------------------------------------

SMALL = Schema(
    (
        F(1, "id", it.LONG, True),
        F(2, "name", it.STRING),
        F(3, "ts", it.TIMESTAMP),
        F(4, "s", it.StructType((F(5, "a", it.INT, True),))),
    )
)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"id": [1], "extra": [1]}, "column 'extra' is not in the table schema"),
        ({"name": ["x"]}, "required column 'id' is missing"),
        ({"id": pa.array([1, None])}, "column 'id' is required but 1 of its values are null"),
        ({"id": ["1"]}, "column 'id': Arrow type string cannot be written as Iceberg long"),
        ({"id": pa.array([2**63 - 1], pa.uint64()), "name": [1]}, "column 'name'"),
        ({"id": pa.array([2**64 - 1], pa.uint64())}, "column 'id': uint64 values do not fit"),
        ({"id": [1], "ts": pa.array([1], pa.timestamp("us", "UTC"))}, "column 'ts'"),
        (
            {"id": [1], "ts": pa.array([1001], pa.timestamp("ns"))},
            "column 'ts': timestamp.ns. values do not fit",
        ),
        (
            {"id": [1], "s": pa.array([{"a": None}], pa.struct([("a", pa.int32())]))},
            r"column 's\.a' is required but 1 of its values are null",
        ),
        ({"id": [1], "s": [{"a": 1, "b": 2}]}, r"column s\.'b' is not in the table schema"),
        ({"id": [1], "s": [1]}, "column 's': Arrow type int64 cannot be written as Iceberg struct"),
    ],
)
def test_data_that_does_not_fit_the_schema(tmp_path: Path, data: dict[str, Any], match: str):
    with pytest.raises(SchemaMismatch, match=match):
        write(tmp_path, SMALL, pa.table(data))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_casts_that_keep_values_and_defaults(tmp_path: Path):
    schema = Schema(
        (
            *SMALL.fields,
            F(6, "n", it.INT, True, write_default=42, has_write_default=True),
            F(7, "label", it.STRING, write_default="none", has_write_default=True),
            F(8, "u", it.UUID),
        )
    )
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int8()),
            "name": pa.array(["a", "b"]).dictionary_encode(),
            "ts": pa.array([1000, None], pa.timestamp("ns")),  # whole microseconds: no value changes
            "s": pa.array([None, {"a": 5}], pa.struct([pa.field("a", pa.int16(), nullable=True)])),
            "u": pa.ExtensionArray.from_storage(pa.uuid(), pa.array([U[0].bytes, None], pa.binary(16))),
        }
    )
    [f] = write(tmp_path, schema, data)
    assert read_ours(f.path, schema).to_pylist() == [
        {"id": 1, "name": "a", "ts": dt.datetime(1970, 1, 1, 0, 0, 0, 1), "s": None, "n": 42, "label": "none",
         "u": U[0].bytes},
        {"id": 2, "name": "b", "ts": None, "s": {"a": 5}, "n": 42, "label": "none", "u": None},
    ]  # fmt: skip
    assert f.null_value_counts[5] == 1  # the required field under a null struct is null there


def test_a_struct_write_default_of_braces_takes_each_fields_write_default(tmp_path: Path):
    """Spec "Default values": a struct default {} takes its fields' own defaults; it was written as nulls
    (a required field then failed the write)."""
    inner = (
        F(3, "x", it.INT, True, initial_default=0, write_default=7, has_initial_default=True,
          has_write_default=True),
        F(4, "y", it.STRING, initial_default="a", write_default="b", has_initial_default=True,
          has_write_default=True),
        F(5, "z", it.LONG),
    )  # fmt: skip
    p = F(2, "p", it.StructType(inner), initial_default={}, write_default={}, has_initial_default=True,
          has_write_default=True)  # fmt: skip
    schema = Schema((F(1, "id", it.LONG, True), p))
    [f] = write(tmp_path, schema, pa.table({"id": [1, 2]}))
    assert read_ours(f.path, schema).column("p").to_pylist() == [{"x": 7, "y": "b", "z": None}] * 2


def test_unknown_columns_are_omitted_and_unsupported_types_refused(tmp_path: Path):
    schema = Schema((F(1, "id", it.LONG, True), F(2, "nothing", it.UNKNOWN)))
    [f] = write(tmp_path, schema, pa.table({"id": [1, 2]}))
    assert pq.read_table(f.path).column_names == ["id"]
    assert read_ours(f.path, schema).to_pylist() == [{"id": 1, "nothing": None}, {"id": 2, "nothing": None}]
    with pytest.raises(UnsupportedFeature, match="variant"):
        write(tmp_path, Schema((F(1, "v", it.VARIANT),)), pa.table({"id": [1]}).drop(["id"]))
    listed = Schema((F(1, "id", it.LONG, True), F(2, "l", it.ListType(3, it.UNKNOWN, False))))
    with pytest.raises(
        UnsupportedFeature, match=r"list<unknown> columns is not supported: unknown in a list"
    ):
        write(tmp_path, listed, pa.table({"id": [1]}))


# -- properties ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "name"),
    [
        ("zstd", "ZSTD"),
        ("GZIP", "GZIP"),
        ("snappy", "SNAPPY"),
        ("uncompressed", "UNCOMPRESSED"),
        ("brotli", "BROTLI"),
    ],
)
def test_compression_codec(tmp_path: Path, codec: str, name: str):
    [f] = write(tmp_path, SMALL, pa.table({"id": list(range(1000))}), write__parquet__compression_codec=codec)
    md = pq.read_metadata(f.path)
    assert {md.row_group(0).column(i).compression for i in range(md.num_columns)} == {name}


def test_default_codec_and_level(tmp_path: Path):
    data = pa.table({"id": list(range(50_000)), "name": [f"row {i % 1000} " * 3 for i in range(50_000)]})
    [fast] = write(tmp_path / "a", SMALL, data)
    [small] = write(tmp_path / "b", SMALL, data, write__parquet__compression_level="19")
    assert pq.read_metadata(fast.path).row_group(0).column(0).compression == "ZSTD"
    assert small.file_size_in_bytes < fast.file_size_in_bytes
    assert read_ours(small.path, SMALL).equals(read_ours(fast.path, SMALL))


@pytest.mark.parametrize(
    ("codec", "name", "level"),
    [("snappy", "SNAPPY", None), ("uncompressed", "UNCOMPRESSED", None), ("lz4_raw", "LZ4", None),
     ("gzip", "GZIP", 3), ("zstd", "ZSTD", 3)],
)  # fmt: skip
def test_a_level_applies_to_codecs_that_have_levels_only(
    tmp_path: Path, codec: str, name: str, level: int | None
):
    """Java's Parquet.java sets the level for gzip, brotli and zstd and ignores it otherwise: a level kept
    from zstd after switching the codec to snappy failed every write."""
    props = {"write.parquet.compression-codec": codec, "write.parquet.compression-level": "3"}
    assert WriteOptions.from_properties(props).compression_level == level
    data = pa.table({"id": list(range(1000))})
    [f] = write_data_files(IO, str(tmp_path), SMALL, UNPARTITIONED, data, properties=props, backend="cpu")
    assert pq.read_metadata(f.path).row_group(0).column(0).compression == name


@pytest.mark.parametrize(
    ("codec", "level", "bounds"),
    [("gzip", "99", "1 to 9"), ("zstd", "23", "-131072 to 22"), ("brotli", "12", "0 to 11")],
)
def test_a_level_out_of_the_codecs_range_is_refused(codec: str, level: str, bounds: str):
    """A gzip level of 99 failed every write inside zlib ('deflateInit failed')."""
    props = {"write.parquet.compression-codec": codec, "write.parquet.compression-level": level}
    with pytest.raises(InvalidProperty, match=rf"compression-level='{level}': {codec} levels are {bounds}"):
        WriteOptions.from_properties(props)


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ("write.parquet.compression-codec", "lzo"),
        ("write.target-file-size-bytes", "big"),
        ("write.target-file-size-bytes", "0"),
        ("write.parquet.row-group-size-bytes", "-5"),
        ("write.parquet.compression-level", "high"),
        ("write.format.default", "orc"),
        ("write.metadata.metrics.default", "most"),
    ],
)
def test_bad_properties_name_themselves(tmp_path: Path, prop: str, value: str):
    with pytest.raises((InvalidProperty, UnsupportedFeature), match=re.escape(prop)):
        write_data_files(
            IO, str(tmp_path), SMALL, UNPARTITIONED, pa.table({"id": [1]}), properties={prop: value}
        )


def _page_rows(path: str) -> list[int]:
    """The row count of each data page of the file's first column (page headers read with the engine's
    own Thrift compact-protocol decoder)."""
    md = pq.ParquetFile(path).metadata
    data = memoryview(Path(path).read_bytes())
    out = []
    for g in range(md.num_row_groups):
        c = md.row_group(g).column(0)
        pos = (
            c.dictionary_page_offset
            if c.has_dictionary_page and c.dictionary_page_offset
            else c.data_page_offset
        )
        end = pos + c.total_compressed_size
        while pos < end:
            header, size = decode_struct(data[pos:])
            kind, stored = header.get(1), header.get(3)
            assert isinstance(stored, int)
            if kind in (0, 3):  # DATA_PAGE (num_values of header 5) or DATA_PAGE_V2 (num_rows of header 8)
                page = header.get(5 if kind == 0 else 8)
                assert isinstance(page, Struct)
                count = page.get(1 if kind == 0 else 3)
                assert isinstance(count, int)
                out.append(count)
            pos += size + stored
    return out


@pytest.mark.parametrize(("limit", "largest"), [(None, 20_000), ("1000", 1000)])
def test_pages_hold_at_most_the_page_row_limit(tmp_path: Path, limit: str | None, largest: int) -> None:
    """write.parquet.page-row-limit (Java's default 20,000) was ignored: pages held what their byte size
    allowed."""
    data = pa.table({"id": pa.array(range(50_000), pa.int64())})
    [f] = (
        write(tmp_path, SMALL, data)
        if limit is None
        else write(tmp_path, SMALL, data, write__parquet__page_row_limit=limit)
    )
    rows = _page_rows(f.path)
    assert sum(rows) == 50_000 and max(rows) == largest


def test_a_malformed_page_row_limit_is_refused_naming_it() -> None:
    with pytest.raises(InvalidProperty, match=r"write\.parquet\.page-row-limit='abc'"):
        WriteOptions.from_properties({"write.parquet.page-row-limit": "abc"})


# -- files: names, publishing, failures ---------------------------------------------------------------------

NAME = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d{5}\.parquet$")


def test_file_names_and_data_path(tmp_path: Path):
    [f] = write(tmp_path, SMALL, pa.table({"id": [1]}))
    assert f.path.startswith(f"{tmp_path}/data/") and NAME.match(os.path.basename(f.path))
    assert [p.name for p in (tmp_path / "data").iterdir()] == [os.path.basename(f.path)]  # no temporary files
    [g] = write(tmp_path, SMALL, pa.table({"id": [1]}), write__data__path=str(tmp_path / "elsewhere"))
    assert os.path.dirname(g.path) == str(tmp_path / "elsewhere")


def test_empty_input_writes_nothing(tmp_path: Path):
    assert write(tmp_path, SMALL, pa.table({"id": pa.array([], pa.int64())})) == []
    assert write(tmp_path, SMALL, []) == []
    assert not (tmp_path / "data").exists()


def test_inputs_table_batches_and_reader(tmp_path: Path):
    table = pa.table({"id": list(range(10)), "name": [str(i) for i in range(10)]})
    for i, data in enumerate([table, table.to_batches(max_chunksize=3), pa.RecordBatchReader.from_batches(
        table.schema, table.to_batches(max_chunksize=4))]):  # fmt: skip
        [f] = write(tmp_path / str(i), SMALL, data)
        assert read_ours(f.path, SMALL).column("id").to_pylist() == list(range(10))


class FixedPlace:
    def __init__(self, path: str) -> None:
        self.path = path

    def new_data_location(self, file_name: str, partition_path: str | None) -> str:
        return self.path


def test_never_overwrites(tmp_path: Path):
    target = tmp_path / "taken.parquet"
    target.write_bytes(b"precious")
    with pytest.raises(FileExistsError, match=r"taken\.parquet"):
        write_data_files(IO, FixedPlace(str(target)), SMALL, UNPARTITIONED, pa.table({"id": [1]}))
    assert target.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.parquet"]


def test_a_failure_removes_what_was_written(tmp_path: Path):
    good = pa.table({"id": list(range(5000))}).to_batches()
    bad = pa.table({"id": pa.array([1, None])}).to_batches()
    props = {"write.target-file-size-bytes": "1000", "write.parquet.row-group-size-bytes": "1000"}
    with pytest.raises(SchemaMismatch):
        write_data_files(IO, str(tmp_path), SMALL, UNPARTITIONED, [*good, *bad], properties=props)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


# -- row groups and rolling ------------------------------------------------------------------------------


def row_groups(path: str) -> list[tuple[int, int]]:
    """(rows, compressed bytes) of each row group."""
    md = pq.read_metadata(path)
    return [
        (
            md.row_group(g).num_rows,
            sum(md.row_group(g).column(c).total_compressed_size for c in range(md.num_columns)),
        )
        for g in range(md.num_row_groups)
    ]


def footer_length(path: str) -> int:
    with open(path, "rb") as f:
        f.seek(-8, 2)
        return int.from_bytes(f.read(4), "little") + 8


@pytest.mark.parametrize("rows", [60_000, 66_000, 90_000])
def test_rolling_by_target_file_size(tmp_path: Path, rows: int):
    schema = Schema((F(1, "id", it.LONG, True), F(2, "x", it.DOUBLE)))
    data = pa.table(
        {"id": pa.array(range(rows), pa.int64()), "x": pc.sin(pa.array(range(rows), pa.float64()))}
    )
    target, group = 200_000, 64_000  # Arrow bytes per row: 16; about 4000 rows per row group
    files = write(
        tmp_path, schema, data.to_batches(max_chunksize=7777),
        write__target_file_size_bytes=str(target), write__parquet__row_group_size_bytes=str(group),
    )  # fmt: skip
    assert len(files) > 2
    full = max(r for f in files for r, _ in row_groups(f.path))
    assert full == group // 16
    for f in files:
        groups = row_groups(f.path)
        assert f.file_size_in_bytes <= target + max(b for _, b in groups) + footer_length(f.path)
        assert all(r == full for r, _ in groups[:-1]) and groups[-1][0] <= full  # only the tail is short
        assert f.record_count >= full  # no file smaller than a row group: the tail joins the last file
        assert f.record_count == sum(r for r, _ in groups)
    assert all(f.file_size_in_bytes > target / 2 for f in files[:-1])
    ids = pa.concat_tables([read_ours(f.path, schema) for f in files]).column("id").to_pylist()
    assert ids == list(range(rows))
    # each file's metrics are its own rows'
    first = files[0]
    assert first.lower_bounds[1] == struct.pack("<q", 0)
    assert first.upper_bounds[1] == struct.pack("<q", first.record_count - 1)


MIXED_SCHEMA = Schema((F(1, "id", it.LONG, True), F(2, "s", it.STRING), F(3, "p", it.INT)))


def mixed_rows(n: int, *, partitions: bool = False) -> pa.Table:
    """``n`` rows that compress to almost nothing, then ``n`` of random text (about 21 bytes a row on disk);
    with ``partitions`` the two kinds in partitions ``p=0`` and ``p=1``, interleaved."""
    rng = np.random.default_rng(5)
    text = [rng.bytes(16).hex() for _ in range(n)]
    table = pa.table(
        {
            "id": pa.array(range(2 * n), pa.int64()),
            "s": ["constant text"] * n + text,
            "p": pa.array([0] * n + [1] * n, pa.int32()),
        }
    )
    if partitions:
        order = np.argsort(np.arange(2 * n) % n, kind="stable")  # rows of the two halves in turn
        table = table.take(pa.array(order))
    return table


def file_ratios(files: list[ContentFile], target: int) -> list[float]:
    return [round((f.file_size_in_bytes - footer_length(f.path)) / target, 2) for f in files]


@pytest.mark.parametrize("row_group", [None, "65536", "262144"])
def test_files_roll_on_the_bytes_written_when_compression_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_group: str | None
) -> None:
    """Rows that compress to nothing, then rows that do not: each file (but the last) is 0.75 to 1.25 times
    the target (the compression of the first rows no longer sizes a row group past the file: one file of
    three times the target before), as one thread and three write it, byte for byte."""
    target = 1 << 18
    props = {"write.target-file-size-bytes": str(target)}
    if row_group is not None:  # at or below the target: files are not a row group and a bit
        props["write.parquet.row-group-size-bytes"] = row_group
    data = mixed_rows(40_000)
    out = {}
    for workers in (1, 3):
        root = tmp_path / str(workers)
        monkeypatch.setattr("gpu_engine.io.parquet_write._workers", lambda: workers)  # noqa: B023
        batches = data.to_batches(max_chunksize=8192)
        files = write_data_files(IO, str(root), MIXED_SCHEMA, UNPARTITIONED, batches, properties=props)
        out[workers] = [(Path(f.path).read_bytes(), f.record_count) for f in files]
        ratios = file_ratios(files, target)
        assert len(files) >= 3 and all(0.75 <= r <= 1.25 for r in ratios[:-1]), ratios
        assert ratios[-1] <= 1.25
        ids = pa.concat_tables([read_ours(f.path, MIXED_SCHEMA) for f in files]).column("id")
        assert ids.to_pylist() == list(range(80_000))
    assert out[1] == out[3]


def test_each_partition_is_judged_by_its_own_compression(tmp_path: Path) -> None:
    """A partition of rows that compress to nothing beside one that does not: its rows make one small
    file (files of a few hundred bytes before: sized by the other partition's compression)."""
    spec = PartitionSpec(0, (PartitionField((3,), 1000, "p", "identity"),))
    target = 1 << 18
    files = write(
        tmp_path, MIXED_SCHEMA, mixed_rows(40_000, partitions=True).to_batches(max_chunksize=4096), spec,
        write__target_file_size_bytes=str(target),
    )  # fmt: skip
    compressible = [f for f in files if f.partition == (0,)]
    assert [f.record_count for f in compressible] == [40_000]
    ratios = file_ratios([f for f in files if f.partition == (1,)], target)
    assert len(ratios) >= 3 and all(0.75 <= r <= 1.25 for r in ratios[:-1]), ratios


def test_row_group_size(tmp_path: Path):
    data = pa.table({"id": pa.array(range(100_000), pa.int64())})  # 8 Arrow bytes a row
    schema = Schema((F(1, "id", it.LONG, True),))
    [f] = write(tmp_path, schema, data, write__parquet__row_group_size_bytes=str(80_000))
    assert [r for r, _ in row_groups(f.path)] == [10_000] * 10
    [g] = write(tmp_path, schema, data.to_batches(max_chunksize=333))
    assert [r for r, _ in row_groups(g.path)] == [100_000]  # small batches gather into one row group


@pytest.mark.parametrize(("least", "expected"), [(None, [100, 100, 100, 50]), ("7", [7] * 50)])
def test_row_groups_hold_the_minimum_rows_java_checks_after(
    tmp_path: Path, least: str | None, expected: list[int]
) -> None:
    """write.parquet.row-group-check-min-record-count (default 100): Java's writer looks at a row
    group's size first after that many rows, so a tiny row-group-size-bytes still gives groups of that
    many rows (one row a group before: 350 row groups for 350 rows), from one-row batches too."""
    data = pa.table({"id": pa.array(range(350), pa.int64())})
    schema = Schema((F(1, "id", it.LONG, True),))
    props = {"write__parquet__row_group_size_bytes": "1"}
    if least is not None:
        props["write__parquet__row_group_check_min_record_count"] = least
    for source in (data, data.to_batches(max_chunksize=1)):
        [f] = write(tmp_path, schema, source, UNPARTITIONED, **props)
        assert [r for r, _ in row_groups(f.path)] == expected
        assert pq.read_table(f.path)["id"].to_pylist() == list(range(350))


# -- partitions ------------------------------------------------------------------------------------------

PART_SCHEMA = Schema(
    (
        F(1, "id", it.LONG, True),
        F(2, "cat", it.STRING),
        F(3, "ts", it.TIMESTAMPTZ),
        F(4, "name", it.STRING),
        F(5, "s", it.StructType((F(6, "d", it.DATE),))),
    )
)
PART_SPEC = PartitionSpec(
    3,
    (
        PartitionField((2,), 1000, "cat", "identity"),
        PartitionField((1,), 1001, "id_bucket", "bucket[2]"),
        PartitionField((3,), 1002, "ts_day", "day"),
        PartitionField((4,), 1003, "name trunc", "truncate[2]"),
    ),
)


def part_data(n: int) -> pa.Table:
    cats = ["a b", "x/y", None, "\u00e9t\u00e9=&"]
    return pa.table(
        {
            "id": list(range(n)),
            "cat": [cats[i % len(cats)] for i in range(n)],
            "ts": pa.array(
                [
                    None if i % 11 == 0 else (i % 3) * 86_400_000_000 + 1_704_067_200_000_000 - i
                    for i in range(n)
                ],
                pa.timestamp("us", "UTC"),
            ),
            "name": [None if i % 13 == 0 else f"{'ab'[i % 2]} {i}" for i in range(n)],
        }
    )


def pyiceberg_spec(spec: PartitionSpec) -> PyPartitionSpec:
    return PyPartitionSpec(
        *(
            PyPartitionField(f.source_id, f.field_id, parse_transform(f.transform), f.name)
            for f in spec.fields
        ),
        spec_id=spec.spec_id,
    )


def test_partitioned_write(tmp_path: Path, backend: str):
    data = part_data(300)
    files = write_data_files(
        IO, str(tmp_path), PART_SCHEMA, PART_SPEC, data.to_batches(max_chunksize=64), backend=backend
    )
    py_schema, py_spec = pyiceberg_schema(PART_SCHEMA), pyiceberg_spec(PART_SPEC)
    transforms = [
        (parse_transform(f.transform).transform(py_schema.find_type(f.source_id)), f.source_id)
        for f in PART_SPEC.fields
    ]
    seen: list[int] = []
    partitions = set()
    for f in files:
        assert f.spec_id == 3 and len(f.partition) == 4
        rows = read_ours(f.path, PART_SCHEMA).to_pylist()
        seen += [r["id"] for r in rows]
        for r in rows:
            source = {
                1: r["id"],
                2: r["cat"],
                3: None if r["ts"] is None else physical(r["ts"]),
                4: r["name"],
            }
            assert tuple(fn(source[sid]) for fn, sid in transforms) == f.partition
        assert all(v is None or type(v) is t for v, t in zip(f.partition, (str, int, int, str), strict=True))
        expected_dir = py_spec.partition_to_path(Record(*f.partition), py_schema)  # no ~ or * in these values
        assert f.path == f"{tmp_path}/data/{expected_dir}/{os.path.basename(f.path)}"
        assert f.record_count == len(rows) and f.value_counts[1] == len(rows)
        partitions.add(f.partition)
    assert sorted(seen) == list(range(300)) and len(partitions) == len(files)  # one file per partition
    some = next(f for f in files if f.partition[0] == "x/y")
    assert "/cat=x%2Fy/" in some.path
    assert any("/cat=null/" in f.path and f.partition[0] is None for f in files)
    assert any("/ts_day=null/" in f.path for f in files) and any("/name+trunc=null/" in f.path for f in files)


def test_partition_source_in_a_struct_and_void(tmp_path: Path):
    spec = PartitionSpec(
        0, (PartitionField((6,), 1000, "d", "identity"), PartitionField((1,), 1001, "gone", "void"))
    )
    data = pa.table(
        {
            "id": [1, 2, 3],
            "s": pa.array(
                [{"d": dt.date(2024, 1, 2)}, None, {"d": dt.date(2024, 1, 2)}],
                pa.struct([("d", pa.date32())]),
            ),
        }
    )
    files = write(tmp_path, PART_SCHEMA, data, spec)
    assert sorted(((f.partition, f.record_count) for f in files), key=str) == [
        ((19724, None), 2),
        ((None, None), 1),
    ]
    assert {os.path.relpath(os.path.dirname(f.path), tmp_path / "data") for f in files} == {
        "d=2024-01-02/gone=null",
        "d=null/gone=null",
    }


def test_partition_rows_roll_per_partition(tmp_path: Path):
    spec = PartitionSpec(0, (PartitionField((1,), 1000, "b", "bucket[2]"),))
    data = pa.table({"id": np.random.default_rng(7).integers(0, 2**62, 20_000)})  # incompressible
    files = write(
        tmp_path, PART_SCHEMA, data.to_batches(max_chunksize=1000), spec,
        write__target_file_size_bytes="40000", write__parquet__row_group_size_bytes="10000",
    )  # fmt: skip
    by_partition: dict[tuple[Any, ...], list[ContentFile]] = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    assert sorted(by_partition) == [(0,), (1,)] and all(len(v) > 1 for v in by_partition.values())
    assert sum(f.record_count for f in files) == 20_000
    for f in files:
        assert {BUCKET_2(v) for v in read_ours(f.path, PART_SCHEMA).column("id").to_pylist()} == {
            f.partition[0]
        }


def BUCKET_2(v: int) -> int:  # noqa: N802 (a transform, named as one)
    out = parse_transform("bucket[2]").transform(LongType())(v)
    assert isinstance(out, int)
    return out


@pytest.mark.parametrize(
    ("transform", "source", "value", "text"),
    [  # Iceberg Java's Transform.toHumanString, URL-encoded (':' is %3A, ' ' is '+', '~' is %7E, '+' %2B)
        ("identity", it.TIMESTAMP, 1_704_103_200_000_000, "2024-01-01T10%3A00%3A00"),
        ("identity", it.TIMESTAMP, 1_704_103_201_500_000, "2024-01-01T10%3A00%3A01.5"),
        ("identity", it.TIMESTAMP, -1, "1969-12-31T23%3A59%3A59.999999"),
        ("identity", it.TIMESTAMPTZ, 1_704_103_200_000_000, "2024-01-01T10%3A00%3A00%2B00%3A00"),
        ("identity", it.TIMESTAMP_NS, 1_704_103_201_000_000_001, "2024-01-01T10%3A00%3A01.000000001"),
        ("identity", it.TIME, 3_600_000_000, "01%3A00"),
        ("identity", it.TIME, 3_723_500_000, "01%3A02%3A03.500"),
        ("identity", it.TIMESTAMPTZ_NS, 500, "1970-01-01T00%3A00%3A00.0000005%2B00%3A00"),
        ("identity", it.TIMESTAMP_NS, 120_000, "1970-01-01T00%3A00%3A00.00012"),
        ("identity", it.DATE, 19724, "2024-01-02"),
        ("identity", it.DOUBLE, 1e10, "1.0E10"),
        ("identity", it.DOUBLE, 0.5, "0.5"),
        ("identity", it.FLOAT, 0.1, "0.1"),
        ("identity", it.BOOLEAN, True, "true"),
        ("identity", it.BINARY, b"\x00\xff", "AP8%3D"),
        ("identity", it.decimal(9, 2), Decimal("1.50"), "1.50"),
        ("identity", it.UUID, uuid.UUID(int=5), "00000000-0000-0000-0000-000000000005"),
        ("identity", it.STRING, "a b/c~*", "a+b%2Fc%7E*"),
        ("year", it.DATE, 54, "2024"),
        ("month", it.TIMESTAMP, -1, "1969-12"),
        ("day", it.TIMESTAMP, 19724, "2024-01-02"),
        ("hour", it.TIMESTAMPTZ, 473_362, "2024-01-01-10"),
        ("bucket[8]", it.STRING, 3, "3"),
        ("truncate[2]", it.LONG, -10, "-10"),
        # years outside 1000..9999, as java.time (Python's datetime stops at 1 and 9999)
        ("hour", it.TIMESTAMP, -17_259_889, "0000-12-31-23"),
        ("hour", it.TIMESTAMP, 2_932_897 * 24, "10000-01-01-00"),
        ("day", it.DATE, -719_163, "0000-12-31"),
        ("identity", it.DATE, -719_163, "0000-12-31"),
        ("identity", it.TIMESTAMP, -30_628_713_600_000_000, "0999-06-01T00%3A00%3A00"),
        ("identity", it.TIMESTAMP, 2_932_897 * 86_400_000_000, "%2B10000-01-01T00%3A00%3A00"),
        (
            "identity",
            it.TIMESTAMPTZ,
            -719_529 * 86_400_000_000 + 1,
            "-0001-12-31T00%3A00%3A00.000001%2B00%3A00",
        ),
    ],
)
def test_partition_path_strings(transform: str, source: it.PrimitiveType, value: Any, text: str):
    schema = Schema((F(1, "c", source),))
    spec = PartitionSpec(0, (PartitionField((1,), 1000, "p", transform),))
    assert partition_path(spec, schema, (value,)) == f"p={text}"


# -- partitions written side by side ---------------------------------------------------------------------

BUCKETS = PartitionSpec(0, (PartitionField((1,), 1000, "b", "bucket[5]"),))


def described(files: list[ContentFile], root: Path) -> list[tuple[Any, ...]]:
    """Everything about the files written but the random name prefix: name counter, directory, partition,
    counts, metrics, split offsets and the rows in file order."""
    return [
        (
            os.path.basename(f.path)[-len("00000.parquet") :],
            os.path.relpath(os.path.dirname(f.path), root),
            f.partition,
            f.record_count,
            f.file_size_in_bytes,
            f.value_counts,
            f.null_value_counts,
            f.lower_bounds,
            f.upper_bounds,
            f.split_offsets,
            read_ours(f.path, PART_SCHEMA).column("id").to_pylist(),
        )
        for f in files
    ]


def write_with(
    monkeypatch: pytest.MonkeyPatch,
    workers: int,
    root: Path,
    spec: PartitionSpec,
    batches: list[pa.RecordBatch],
    props: dict[str, str],
) -> list[ContentFile]:
    """``write_data_files`` of ``PART_SCHEMA`` rows with ``workers`` threads."""
    monkeypatch.setattr("gpu_engine.io.parquet_write._workers", lambda: workers)
    return write_data_files(IO, str(root), PART_SCHEMA, spec, batches, properties=props)


def test_threads_write_what_one_thread_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Partitions finished on a thread pool: the same files, names, rows and metrics, in the same order."""
    rng = np.random.default_rng(11)
    data = pa.table({"id": rng.integers(0, 2**62, 30_000), "name": [f"n{i % 97}" for i in range(30_000)]})
    props = {"write.target-file-size-bytes": "40000", "write.parquet.row-group-size-bytes": "20000"}
    out = {}
    for workers in (1, 3):
        root = tmp_path / str(workers)
        files = write_with(monkeypatch, workers, root, BUCKETS, data.to_batches(max_chunksize=4000), props)
        out[workers] = described(files, root)
    assert out[1] == out[3]
    per_partition = [d[2] for d in out[1]]
    assert sorted(set(per_partition)) == [(0,), (1,), (2,), (3,), (4,)]
    assert all(per_partition.count(p) > 1 for p in per_partition)  # files rolled before the tails
    ids = [i for d in out[1] for i in d[-1]]
    assert sorted(ids) == sorted(data.column("id").to_pylist())


def test_row_groups_encoded_side_by_side_make_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One file's row groups encoded on a pool and spliced: byte for byte the file one thread writes."""
    rng = np.random.default_rng(12)
    data = pa.table({"id": rng.integers(0, 2**62, 60_000), "name": [f"n{i % 89}" for i in range(60_000)]})
    props = {"write.target-file-size-bytes": "400000", "write.parquet.row-group-size-bytes": "100000"}
    out = {}
    for workers in (1, 3):
        batches = data.to_batches(max_chunksize=3000)
        files = write_with(monkeypatch, workers, tmp_path / str(workers), UNPARTITIONED, batches, props)
        out[workers] = [
            (Path(f.path).read_bytes(), f.record_count, f.split_offsets, f.lower_bounds) for f in files
        ]
        assert all(pq.read_metadata(f.path).num_row_groups > 2 for f in files)
    assert len(out[1]) > 1 and out[1] == out[3]


@pytest.mark.parametrize("props", [{}, {"write.parquet.bloom-filter-enabled.column.name": "true"}])
def test_row_groups_encoded_as_column_ranges_match_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, props: dict[str, str]
):
    """Row groups encoded as ranges of their columns on four threads and joined: without bloom filters
    byte for byte the file one thread writes; with them the same rows, metrics and column chunks."""
    monkeypatch.setattr("gpu_engine.io.parquet_write._SLICE_BYTES", 0)
    rng = np.random.default_rng(13)
    data = pa.table({"id": rng.integers(0, 2**62, 40_000), "name": [f"n{i % 89}" for i in range(40_000)]})
    props = {**props, "write.parquet.row-group-size-bytes": "100000"}
    out: dict[int, tuple[Any, ...]] = {}
    for workers in (1, 4):
        batches = data.to_batches(max_chunksize=3000)
        [f] = write_with(monkeypatch, workers, tmp_path / str(workers), UNPARTITIONED, batches, props)
        md = pq.read_metadata(f.path)
        assert md.num_row_groups > 2
        chunks = [md.row_group(g).column(c).to_dict() for g in range(md.num_row_groups) for c in (0, 1)]
        for chunk in chunks:
            for key in ("file_offset", "dictionary_page_offset", "data_page_offset", "bloom_filter_offset"):
                chunk.pop(key)
        rows = pq.read_table(f.path).to_pylist()
        out[workers] = (chunks, rows, f.value_counts, f.lower_bounds, f.upper_bounds, f.column_sizes)
        if not props.get("write.parquet.bloom-filter-enabled.column.name"):
            out[workers] += (Path(f.path).read_bytes(),)
    assert out[1] == out[4]


def test_column_ranges_keep_the_settings_of_columns_named_with_dots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A top-level column ``a.b`` (beside ``a``) in its own range keeps its bloom filter and dictionary:
    the range's leaves are found by field, not by the text before the first dot."""
    monkeypatch.setattr("gpu_engine.io.parquet_write._SLICE_BYTES", 0)
    schema = Schema((F(1, "a", it.LONG), F(2, "a.b", it.STRING), F(3, "c", it.LONG)))
    n = 30_000
    data = pa.table({"a": np.arange(n), "a.b": [f"v{i % 7}" for i in range(n)], "c": np.arange(n) * 3})
    props = {"write.parquet.bloom-filter-enabled.column.a.b": "true"}
    chunks = {}
    for workers in (1, 3):
        monkeypatch.setattr("gpu_engine.io.parquet_write._workers", lambda: workers)  # noqa: B023
        [f] = write_data_files(
            IO, str(tmp_path / str(workers)), schema, UNPARTITIONED, data, properties=props
        )
        dotted = pq.read_metadata(f.path).row_group(0).column(1)
        assert dotted.path_in_schema == "a.b" and dotted.bloom_filter_length
        assert "RLE_DICTIONARY" in dotted.encodings
        chunks[workers] = (dotted.total_compressed_size, dotted.bloom_filter_length, f.column_sizes)
    assert chunks[1] == chunks[3]


def test_a_failed_row_group_encode_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import gpu_engine.io.parquet_splice as splice
    import gpu_engine.io.parquet_write as pw

    monkeypatch.setattr(pw, "_workers", lambda: 2)
    real, calls = splice.encode_row_group, []

    def failing(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 4:
            raise OSError("disk on fire")
        return real(*args)

    monkeypatch.setattr(pw, "encode_row_group", failing)
    data = pa.table({"id": list(range(50_000))})
    props = {"write.target-file-size-bytes": "100000", "write.parquet.row-group-size-bytes": "40000"}
    with pytest.raises(OSError, match="disk on fire"):
        write_data_files(
            IO, str(tmp_path), PART_SCHEMA, UNPARTITIONED, data.to_batches(2000), properties=props
        )
    assert len(calls) >= 4
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


class Taken:
    """Data locations, but the file of partition ``b=2`` lands on an existing file."""

    def __init__(self, root: Path, taken: Path) -> None:
        self.root, self.taken = root, taken

    def new_data_location(self, file_name: str, partition_path: str | None) -> str:
        return str(self.taken) if partition_path == "b=2" else f"{self.root}/{partition_path}/{file_name}"


def test_a_failed_partition_removes_the_others_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("gpu_engine.io.parquet_write._workers", lambda: 2)
    taken = tmp_path / "taken.parquet"
    taken.write_bytes(b"precious")
    data = pa.table({"id": list(range(2000))})
    with pytest.raises(FileExistsError, match=r"taken\.parquet"):
        write_data_files(IO, Taken(tmp_path / "data", taken), PART_SCHEMA, BUCKETS, data)
    assert taken.read_bytes() == b"precious"
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [taken]


def test_signed_zeros_are_two_partitions_and_nans_one(tmp_path: Path):
    schema = Schema((F(1, "id", it.LONG, True), F(2, "x", it.DOUBLE)))
    spec = PartitionSpec(0, (PartitionField((2,), 1000, "x", "identity"),))
    other_nan = np.frombuffer(struct.pack("<Q", 0x7FF8_0000_0000_0001), np.float64)[0]
    x = pa.array(np.array([0.0, -0.0, np.nan, other_nan, 0.0, -0.0]))
    files = write(tmp_path, schema, pa.table({"id": list(range(6)), "x": x}), spec)
    got = {}
    for f in files:
        [value] = f.partition
        key = "nan" if math.isnan(value) else str(value)
        got[key] = read_ours(f.path, schema).column("id").to_pylist()
        assert all(same([v], [value]) for v in read_ours(f.path, schema).column("x").to_pylist())
    assert got == {"0.0": [0, 4], "-0.0": [1, 5], "nan": [2, 3]}


def test_uuid_identity_partition(tmp_path: Path):
    schema = Schema((F(1, "id", it.LONG, True), F(2, "u", it.UUID)))
    spec = PartitionSpec(0, (PartitionField((2,), 1000, "u", "identity"),))
    u = pa.array([U[0].bytes, U[1].bytes, U[0].bytes, None], pa.binary(16))
    files = write(tmp_path, schema, pa.table({"id": [1, 2, 3, 4], "u": u}), spec)
    got = {f.partition: read_ours(f.path, schema).column("id").to_pylist() for f in files}
    assert got == {(U[0],): [1, 3], (U[1],): [2], (None,): [4]}
    assert {os.path.basename(os.path.dirname(f.path)) for f in files} == {f"u={U[0]}", f"u={U[1]}", "u=null"}


def metrics_of(f: ContentFile) -> tuple[Any, ...]:
    return (f.value_counts, f.null_value_counts, f.nan_value_counts, f.lower_bounds, f.upper_bounds)


def test_metrics_of_one_row_batches_equal_one_batch(tmp_path: Path):
    """A row group gathered from many batches is counted column by column over its chunks."""
    tables = [
        (PRIMITIVES, primitive_table()),
        (NESTED, pa.table(NESTED_ROWS, schema=to_arrow_schema(NESTED))),
    ]
    for i, (schema, table) in enumerate(tables):
        [one] = write(tmp_path / f"one{i}", schema, table, write__metadata__metrics__default="full")
        batches = table.to_batches(max_chunksize=1)
        [many] = write(tmp_path / f"many{i}", schema, batches, write__metadata__metrics__default="full")
        assert len(batches) == 3 and metrics_of(many) == metrics_of(one)
    schema = Schema((F(1, "x", it.DOUBLE), F(2, "d", it.DATE)))
    chunks = [[math.nan], [0.0], [None], [-0.0], [math.nan]]
    days = [[None], [dt.date(2024, 1, 2)], [None], [dt.date(1969, 12, 31)], [None]]
    data = [
        pa.record_batch({"x": pa.array(x, pa.float64()), "d": pa.array(d, pa.date32())})
        for x, d in zip(chunks, days, strict=True)
    ]
    [f] = write(tmp_path / "zeros", schema, data)
    assert metrics_of(f) == (
        {1: 5, 2: 5},
        {1: 1, 2: 3},
        {1: 2},
        {1: struct.pack("<d", -0.0), 2: struct.pack("<i", -1)},
        {1: struct.pack("<d", 0.0), 2: struct.pack("<i", 19724)},
    )


def test_bloom_filters_follow_the_table_properties(tmp_path: Path):
    """write.parquet.bloom-filter-enabled.column.<name> (Java's Parquet.WriteBuilder) was ignored: every
    row group of the column now has a filter, sized for its rows, that DuckDB probes."""
    props = {
        "write.parquet.bloom-filter-enabled.column.name": "true",
        "write.parquet.bloom-filter-fpp.column.name": "0.05",
        "write.parquet.bloom-filter-enabled.column.id": "false",
        "write.parquet.bloom-filter-enabled.column.gone": "true",  # no such column: no filter, as Java
        "write.parquet.row-group-size-bytes": str(16 << 10),
    }
    data = pa.table({"id": list(range(5000)), "name": [f"n{i}" for i in range(5000)]})
    [f] = write_data_files(IO, str(tmp_path), SMALL, UNPARTITIONED, data, properties=props, backend="cpu")
    md = pq.read_metadata(f.path)
    assert md.num_row_groups > 1
    names = [md.schema.column(j).path for j in range(md.num_columns)]
    for i in range(md.num_row_groups):
        columns = {names[j]: md.row_group(i).column(j) for j in range(md.num_columns)}
        assert columns["name"].bloom_filter_length and not columns["id"].bloom_filter_length
    probe = f"select bloom_filter_excludes from parquet_bloom_probe('{f.path}', 'name', 'absent')"
    assert {r[0] for r in duckdb.sql(probe).fetchall()} == {True}
    probe = f"select bloom_filter_excludes from parquet_bloom_probe('{f.path}', 'name', 'n7')"
    assert duckdb.sql(probe).fetchall()[0][0] is False


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("write.parquet.bloom-filter-enabled.column.name", "maybe"),
        ("write.parquet.bloom-filter-fpp.column.name", "2"),
        ("write.parquet.bloom-filter-fpp.column.id", "abc"),
        ("write.parquet.bloom-filter-max-bytes", "x"),
    ],
)
def test_bad_bloom_filter_settings_name_themselves(key: str, value: str):
    enabled = {"write.parquet.bloom-filter-enabled.column.id": "true"}
    with pytest.raises(InvalidProperty, match=re.escape(f"{key}={value!r}")):
        WriteOptions.from_properties({**enabled, key: value})


def test_a_cold_partitions_rows_do_not_hold_their_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Rows of a partition are slices of the (reordered) input batch: a partition with a few of its rows
    would keep the whole batch alive while they wait for more, unseen by the writer's byte counts (a
    skewed streaming append held its whole input). Buffered rows reference little beyond their bytes."""
    import gpu_engine.io.parquet_write as pw

    worst: list[float] = []
    real_add = pw._Writer.add

    def add(self: Any, key: tuple[Any, ...], batch: pa.RecordBatch) -> None:
        real_add(self, key, batch)
        held = [b for part in self.parts.values() for b in part.buffer]
        worst.append(sum(b.get_total_buffer_size() for b in held) / max(sum(b.nbytes for b in held), 1))

    monkeypatch.setattr(pw._Writer, "add", add)
    n = 200_000
    ids = np.arange(n)
    p = np.where(ids % 100 == 0, ids // 100 % 50 + 1, 0)  # 1 % of the rows in 50 cold partitions
    data = pa.table({"id": ids, "name": [f"row-{i}" for i in range(n)]})
    schema = Schema((F(1, "id", it.LONG), F(2, "name", it.STRING), F(3, "p", it.LONG)))
    spec = PartitionSpec(0, (PartitionField((3,), 1000, "p", "identity"),))
    batches = data.append_column("p", pa.array(p)).to_batches(max_chunksize=50_000)
    files = write_data_files(IO, str(tmp_path), schema, spec, batches)
    assert sum(f.record_count for f in files) == n and len(files) == 51
    assert max(worst) < 3, max(worst)


@pytest.mark.parametrize(
    ("t", "rows", "leaves"),
    [
        (it.MapType(2, it.UUID, 3, it.LONG), [None, None], {2: 0, 3: 0}),
        (it.ListType(2, it.ListType(3, it.UUID)), [[None], None, []], {3: 0}),
        (it.ListType(2, it.MapType(3, it.UUID, 4, it.LONG)), [[None], None], {3: 0, 4: 0}),
        (it.MapType(2, it.STRING, 3, it.MapType(4, it.UUID, 5, it.INT)), [[("a", None)]], {2: 1, 4: 0, 5: 0}),
    ],
    ids=["map-key", "list-list", "list-map", "map-map"],
)  # fmt: skip
def test_uuids_nested_in_lists_and_maps_without_elements(
    tmp_path: Path, t: it.IcebergType, rows: list[Any], leaves: dict[int, int]
) -> None:
    """pyarrow cannot build an empty uuid child: rows holding no uuid element at all (only nulls or empty
    lists) once failed every write of such a column, and its metrics."""
    schema = Schema((F(1, "c", t),))
    table = pa.table({"c": pa.array(rows, to_arrow_schema(schema).field("c").type)})  # uuids as fixed[16]
    [f] = write(tmp_path, schema, table)
    assert read_ours(f.path, schema).column("c").to_pylist() == rows
    assert {k: v for k, v in f.value_counts.items() if k in leaves} == leaves


def test_rows_of_a_schema_with_no_stored_column_are_refused(tmp_path: Path) -> None:
    """Only ``unknown`` columns (not stored): the rows cannot be kept, and were once dropped silently."""
    schema = Schema((F(1, "u", it.UNKNOWN),))
    with pytest.raises(
        UnsupportedFeature, match=r"no column a data file stores .*: its rows cannot be written"
    ):
        write(tmp_path, schema, pa.table({"u": pa.nulls(3)}))
    assert write(tmp_path, schema, pa.table({"u": pa.nulls(0)})) == []
    assert not list(tmp_path.rglob("*.parquet"))


@pytest.mark.parametrize(
    ("max_bytes", "fpp"), [(65536, "0.01"), (100_000, "0.01"), (4096, "0.001"), (40, "0.2")]
)
def test_bloom_filters_stay_within_their_maximum_size(tmp_path: Path, max_bytes: int, fpp: str):
    """write.parquet.bloom-filter-max-bytes was checked but not followed: a filter was sized for every row
    of the group (2 million distinct ids, 4 MiB where 1 MiB was the most). As parquet-mr, the filter is
    capped; one sized below the cap for fewer rows stays so."""
    props = {
        "write.parquet.bloom-filter-enabled.column.id": "true",
        "write.parquet.bloom-filter-fpp.column.id": fpp,
        "write.parquet.bloom-filter-max-bytes": str(max_bytes),
    }
    cap = 1 << max(5, max_bytes.bit_length() - 1)
    for rows in (300_000, 100):
        data = pa.table({"id": pa.array(range(rows), pa.int64())})
        [f] = write_data_files(IO, str(tmp_path / str(rows)), SMALL, UNPARTITIONED, data, properties=props)
        length = pq.read_metadata(f.path).row_group(0).column(0).bloom_filter_length
        assert length is not None and length - 64 <= cap  # the filter's bitset and its small header
        if rows == 300_000:
            assert length > cap // 2  # as large as allowed
