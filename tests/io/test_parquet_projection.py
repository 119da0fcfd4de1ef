"""Column projection by field id: schema evolution against small Parquet files written with pyarrow
(ids as ``PARQUET:field_id`` field metadata), expected values written out by hand."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.errors import DataFileError, SchemaMismatch, UnsupportedFeature
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.name_mapping import parse_name_mapping
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_schema import to_arrow_schema
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.parquet_projection import identity_constants, project
from gpu_engine.io.parquet_read import ParquetSource

F = it.NestedField


def fld(name: str, t: pa.DataType, fid: int | None, nullable: bool = True) -> pa.Field:
    meta = None if fid is None else {b"PARQUET:field_id": str(fid).encode()}
    return pa.field(name, t, nullable=nullable, metadata=meta)


def write(tmp: Path, fields: list[pa.Field], data: dict[str, Any], name: str = "f.parquet") -> str:
    path = tmp / name
    pq.write_table(pa.Table.from_pydict(data, schema=pa.schema(fields)), path)
    return str(path)


def read(path: str, schema: Schema, **kw: Any) -> list[dict[str, Any]]:
    with ParquetSource.open(LocalFileIO(), path) as src:
        batches = [fb.batch for fb in src.batches(schema, **kw)]
    table = pa.Table.from_batches(batches, schema=to_arrow_schema(schema))
    assert table.schema.equals(to_arrow_schema(schema), check_metadata=True)
    return list(table.to_pylist())


def base_file(tmp: Path) -> str:
    """``1: a int, 2: b string, 3: c double`` (the spec's Column Projection example)."""
    fields = [fld("a", pa.int32(), 1), fld("b", pa.string(), 2), fld("c", pa.float64(), 3)]
    return write(tmp, fields, {"a": [1, None, 3], "b": ["x", "y", None], "c": [0.5, 1.5, None]})


def test_spec_example_rename_reorder_add(tmp_path: Path) -> None:
    schema = Schema((F(3, "measurement", it.DOUBLE), F(2, "name", it.STRING), F(4, "a", it.INT)))
    assert read(base_file(tmp_path), schema) == [
        {"measurement": 0.5, "name": "x", "a": None},
        {"measurement": 1.5, "name": "y", "a": None},
        {"measurement": None, "name": None, "a": None},
    ]


def test_drop_and_promotions(tmp_path: Path) -> None:
    fields = [
        fld("i", pa.int32(), 1),
        fld("f", pa.float32(), 2),
        fld("d", pa.decimal128(5, 2), 3),
        fld("day", pa.date32(), 4),
        fld("gone", pa.string(), 5),
    ]
    data = {
        "i": [-(2**31), 7],
        "f": [1.5, None],
        "d": [Decimal("-999.99"), Decimal("1.05")],
        "day": [-1, 19000],
    }
    path = write(tmp_path, fields, {**data, "gone": ["p", "q"]})
    schema = Schema(
        (
            F(1, "i", it.LONG),
            F(2, "f", it.DOUBLE),
            F(3, "d", it.decimal(12, 2)),
            F(4, "day", it.TIMESTAMP),
            F(6, "day_ns", it.TIMESTAMP_NS),
        )
    )
    rows = read(path, schema)
    assert [r["i"] for r in rows] == [-(2**31), 7]
    assert [r["f"] for r in rows] == [1.5, None]
    assert [r["d"] for r in rows] == [Decimal("-999.99"), Decimal("1.05")]
    assert [r["day"] for r in rows] == [dt.datetime(1969, 12, 31), dt.datetime(2022, 1, 8)]
    assert "gone" not in rows[0]
    ns = read(path, Schema((F(4, "day", it.TIMESTAMP_NS),)))
    with ParquetSource.open(LocalFileIO(), path) as src:
        batch = next(src.batches(Schema((F(4, "day", it.TIMESTAMP_NS),)))).batch
    assert batch.column(0).cast(pa.int64()).to_pylist() == [-86_400 * 10**9, 19000 * 86_400 * 10**9]
    assert len(ns) == 2


@pytest.mark.parametrize(
    ("file_type", "iceberg", "match"),
    [
        (pa.int64(), it.INT, "int64.*Iceberg int"),
        (pa.string(), it.INT, "string.*Iceberg int"),
        (pa.float64(), it.FLOAT, "double.*Iceberg float"),
        (pa.decimal128(5, 2), it.decimal(10, 3), "decimal"),
        (pa.decimal128(12, 2), it.decimal(10, 2), "decimal"),
        (pa.date32(), it.TIMESTAMPTZ, "date32.*timestamptz"),
        (pa.int32(), it.StructType((F(9, "x", it.INT),)), "struct"),
        (pa.binary(), it.fixed(4), "fixed"),
        (pa.binary(8), it.UUID, "uuid"),
    ],
)
def test_incompatible_types(tmp_path: Path, file_type: pa.DataType, iceberg: Any, match: str) -> None:
    path = write(tmp_path, [fld("v", file_type, 1)], {"v": [None]})
    with pytest.raises(SchemaMismatch, match=rf"f\.parquet: column 'v' \(field id 1\).*{match}"):
        read(path, Schema((F(1, "v", iceberg),)))


def test_defaults_and_required(tmp_path: Path) -> None:
    path = base_file(tmp_path)
    schema = Schema(
        (
            F(1, "a", it.INT),
            F(7, "n", it.LONG, required=True, initial_default=42, has_initial_default=True),
            F(8, "s", it.STRING, initial_default="dflt", has_initial_default=True),
            F(
                9,
                "ts",
                it.TIMESTAMPTZ,
                initial_default="2024-01-15T10:30:45.123456+00:00",
                has_initial_default=True,
            ),
            F(
                10,
                "u",
                it.UUID,
                initial_default="f79c3e09-677c-4bbd-a479-3f349cb785e7",
                has_initial_default=True,
            ),
            F(11, "opt", it.DATE),
        )
    )
    rows = read(path, schema)
    assert rows[0]["n"] == 42 and rows[2]["s"] == "dflt" and rows[1]["opt"] is None
    assert rows[0]["ts"] == dt.datetime(2024, 1, 15, 10, 30, 45, 123456, tzinfo=dt.UTC)
    assert rows[0]["u"] == bytes.fromhex("f79c3e09677c4bbda4793f349cb785e7")
    with pytest.raises(SchemaMismatch, match=r"f\.parquet: required field 'n' \(field id 7\)"):
        read(path, Schema((F(7, "n", it.LONG, required=True),)))


def test_struct_default_fills_sub_field_defaults(tmp_path: Path) -> None:
    """The spec's "Default values" table: point {x default 0, y default 0}."""
    point = it.StructType(
        (
            F(21, "x", it.INT, initial_default=0, has_initial_default=True),
            F(22, "y", it.INT, initial_default=0, has_initial_default=True),
        )
    )
    path = write(tmp_path, [fld("id", pa.int32(), 1)], {"id": [1]})
    assert read(path, Schema((F(20, "point", point),))) == [{"point": None}]
    with_default = F(20, "point", point, initial_default={}, has_initial_default=True)
    assert read(path, Schema((with_default,))) == [{"point": {"x": 0, "y": 0}}]
    some = F(20, "point", point, initial_default={"22": 5}, has_initial_default=True)
    assert read(path, Schema((some,))) == [{"point": {"x": 0, "y": 5}}]
    # a file holding point with only x: y takes its default
    st = pa.struct([fld("x", pa.int32(), 21)])
    path2 = write(tmp_path, [fld("point", st, 20)], {"point": [{"x": 3}, None]}, "g.parquet")
    assert read(path2, Schema((with_default,))) == [{"point": {"x": 3, "y": 0}}, {"point": None}]


def test_nested_struct_list_map_evolution(tmp_path: Path) -> None:
    inner = pa.struct([fld("p", pa.int32(), 11), fld("q", pa.string(), 12), fld("drop", pa.int32(), 13)])
    fields = [
        fld("s", inner, 10),
        fld("l", pa.list_(fld("element", pa.struct([fld("v", pa.int32(), 21)]), 20)), 19),
        fld("m", pa.map_(fld("key", pa.int32(), 31, False), fld("value", pa.float32(), 32)), 30),
    ]
    data = {
        "s": [{"p": 1, "q": "a", "drop": 9}, None],
        "l": [[{"v": 1}, None, {"v": 3}], None],
        "m": [[(1, 0.5), (2, None)], []],
    }
    path = write(tmp_path, fields, data)
    schema = Schema(
        (
            F(19, "list", it.ListType(20, it.StructType((F(21, "w", it.LONG), F(22, "z", it.STRING))))),
            F(10, "s", it.StructType((F(12, "q2", it.STRING), F(11, "p", it.LONG), F(14, "new", it.INT)))),
            F(30, "m", it.MapType(31, it.LONG, 32, it.DOUBLE)),
        )
    )
    assert read(path, schema) == [
        {
            "list": [{"w": 1, "z": None}, None, {"w": 3, "z": None}],
            "s": {"q2": "a", "p": 1, "new": None},
            "m": [(1, 0.5), (2, None)],
        },
        {"list": None, "s": None, "m": []},
    ]


def test_sliced_nested_batches(tmp_path: Path) -> None:
    n = 1000
    fields = [fld("l", pa.list_(fld("element", pa.int32(), 2)), 1)]
    data = {"l": [[i, i + 1] if i % 3 else None for i in range(n)]}
    path = write(tmp_path, fields, data)
    schema = Schema((F(1, "l", it.ListType(2, it.LONG)),))
    with ParquetSource.open(LocalFileIO(), path) as src:
        got = [r for fb in src.batches(schema, batch_size=77) for r in fb.batch.column(0).to_pylist()]
    assert got == data["l"]


def test_unknown_fields_read_as_null(tmp_path: Path) -> None:
    path = base_file(tmp_path)
    assert read(path, Schema((F(1, "a", it.UNKNOWN), F(2, "b", it.STRING)))) == [
        {"a": None, "b": "x"},
        {"a": None, "b": "y"},
        {"a": None, "b": None},
    ]


def test_name_mapping_for_files_without_ids(tmp_path: Path) -> None:
    st = pa.struct([fld("lat", pa.float64(), None), fld("long", pa.float64(), None)])
    fields = [
        fld("record_id", pa.int64(), None),
        fld("location", st, None),
        fld("tags", pa.list_(fld("item", pa.string(), None)), None),
        fld("extra", pa.int32(), None),
    ]
    data = {"record_id": [5], "location": [{"lat": 1.0, "long": 2.0}], "tags": [["t"]], "extra": [1]}
    path = write(tmp_path, fields, data)
    mapping = parse_name_mapping(
        """[ {"field-id": 1, "names": ["id", "record_id"]}, {"field-id": 2, "names": ["data"]},
             {"field-id": 3, "names": ["location"], "fields": [{"field-id": 4, "names": ["latitude", "lat"]},
                 {"field-id": 5, "names": ["longitude", "long"]}]},
             {"field-id": 6, "names": ["tags"], "fields": [{"field-id": 7, "names": ["element"]}]},
             {"names": ["extra"]} ]"""
    )
    loc = it.StructType((F(5, "longitude", it.DOUBLE), F(4, "latitude", it.DOUBLE)))
    schema = Schema(
        (
            F(3, "location", loc),
            F(1, "id", it.LONG),
            F(2, "data", it.STRING),
            F(6, "tags", it.ListType(7, it.STRING)),
        )
    )
    assert read(path, schema, name_mapping=mapping) == [
        {"location": {"longitude": 2.0, "latitude": 1.0}, "id": 5, "data": None, "tags": ["t"]}
    ]
    with pytest.raises(
        SchemaMismatch, match=r"f\.parquet: the file has no field ids and the table has no name"
    ):
        read(path, schema)


def test_file_errors(tmp_path: Path) -> None:
    dup = write(
        tmp_path, [fld("a", pa.int32(), 1), fld("b", pa.int32(), 1)], {"a": [1], "b": [2]}, "dup.parquet"
    )
    with pytest.raises(DataFileError, match=r"dup\.parquet: columns 'a' and 'b' share field id 1"):
        read(dup, Schema((F(1, "a", it.INT),)))
    nulls = write(tmp_path, [fld("a", pa.int32(), 1)], {"a": [1, None]}, "nulls.parquet")
    with pytest.raises(DataFileError, match=r"nulls\.parquet: column 'a' \(field id 1\): holds nulls"):
        read(nulls, Schema((F(1, "a", it.INT, required=True),)))
    st = pa.struct([fld("x", pa.int32(), 2)])
    nested = write(tmp_path, [fld("s", st, 1)], {"s": [{"x": None}]}, "nested.parquet")
    with pytest.raises(DataFileError, match=r"nested\.parquet.*'x' is required but holds nulls"):
        read(nested, Schema((F(1, "s", it.StructType((F(2, "x", it.INT, required=True),))),)))
    # nulls under a null parent struct are fine for a required child
    ok = write(tmp_path, [fld("s", st, 1)], {"s": [None, {"x": 4}]}, "ok.parquet")
    assert read(ok, Schema((F(1, "s", it.StructType((F(2, "x", it.INT, required=True),))),))) == [
        {"s": None},
        {"s": {"x": 4}},
    ]


def test_constants_for_absent_identity_partition_fields(tmp_path: Path) -> None:
    path = base_file(tmp_path)
    spec = PartitionSpec(
        0, (PartitionField((5,), 1000, "d", "identity"), PartitionField((1,), 1001, "b", "bucket[4]"))
    )
    constants = identity_constants(spec, (19045, 3))
    assert constants == {5: 19045}
    schema = Schema((F(1, "a", it.INT), F(5, "d", it.DATE, required=True)))
    rows = read(path, schema, constants=constants)
    assert [r["d"] for r in rows] == [dt.date(2022, 2, 22)] * 3
    assert [r["a"] for r in rows] == [1, None, 3]  # a file column wins over a constant
    assert read(path, Schema((F(1, "a", it.INT),)), constants={1: 99})[0]["a"] == 1


def test_variant_columns(tmp_path: Path) -> None:
    plain = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary())])
    path = write(tmp_path, [fld("v", plain, 1)], {"v": [{"metadata": b"\x01", "value": b"\x0c\x01"}, None]})
    rows = read(path, Schema((F(1, "v", it.VARIANT),)))
    assert rows == [{"v": {"metadata": b"\x01", "value": b"\x0c\x01"}}, {"v": None}]
    shredded = pa.struct(
        [
            pa.field("metadata", pa.binary(), False),
            pa.field("value", pa.binary()),
            pa.field("typed_value", pa.int32()),
        ]
    )
    path2 = write(tmp_path, [fld("v", shredded, 1)], {"v": [None]}, "s.parquet")
    with pytest.raises(UnsupportedFeature, match=r"s\.parquet.*shredded variant"):
        read(path2, Schema((F(1, "v", it.VARIANT),)))


def test_projection_without_a_file() -> None:
    """project() works on a bare Arrow schema: columns to read and the output schema."""
    file_schema = pa.schema([fld("a", pa.int32(), 1), fld("b", pa.string(), 2), fld("c", pa.int64(), 3)])
    requested = Schema((F(3, "c", it.LONG), F(9, "z", it.INT)))
    proj = project("mem.parquet", file_schema, requested)
    assert proj.columns == ("c",) and proj.int96_columns == ()
    batch = pa.RecordBatch.from_pydict({"c": [1, 2]}, schema=pa.schema([file_schema.field("c")]))
    assert proj.apply(batch).to_pylist() == [{"c": 1, "z": None}, {"c": 2, "z": None}]


def _table_rows(rel: str) -> list[dict[str, Any]]:
    from tests.planning._support import load

    tbl = load(rel)
    plan = tbl.scan().plan()
    rows: list[dict[str, Any]] = []
    for task in plan.tasks:
        rows += read(task.file.path, plan.schema)
    return rows


def test_fixture_tables_with_initial_defaults() -> None:
    """Rows of files written before a column was added take its initial-default (values from the metadata,
    converted by hand)."""
    utc = dt.UTC
    rows = _table_rows("impala/iceberg_test/iceberg_v3/test_complex_default")
    old = [r for r in rows if r["i"] == 1]
    assert old == [{"i": 1, "j": None, "ts_tz": dt.datetime(2024, 1, 15, 10, 30, 45, 123456, tzinfo=utc)}]
    rows = _table_rows("impala/iceberg_test/iceberg_v3/iceberg_v3_default_value")
    assert sorted((r["i"], r["j"]) for r in rows) == [(1, -1), (2, 2)]
    rows = _table_rows(
        "duckdb-iceberg/data/persistent/add_columns_with_defaults/default.db/add_columns_with_defaults"
    )
    click = next(r for r in rows if r["col1"] == "click")
    assert click == {
        "col1": "click",
        "col_boolean": True,
        "col_integer": 342342,
        "col_long": -(2**63),
        "col_float": 0.34233999252319336,  # 0.34234 as float32
        "col_double": 0.342343242342342,
        "col_decimal": Decimal("12345.00"),
        "col_date": dt.date(2003, 10, 20),
        "col_time": dt.time(0, 0, 0, 12345),
        "col_timestamp": dt.datetime(1970, 1, 1, 0, 0, 0, 12345),
        "col_timestamptz": dt.datetime(1970, 1, 1, 0, 0, 0, 12345, tzinfo=utc),
        "col_string": "HELLO",
        "col_uuid": bytes.fromhex("f79c3e09677c4bbda4793f349cb785e7"),
        "col_fixed": b"\x01\x02\x03\xff\x03",
        "col_binary": b"\x01\x02",
    }


def test_a_struct_whose_fields_were_all_deleted_keeps_the_rows(tmp_path: Path) -> None:
    """``struct<>`` (the spec allows it: another engine's table, every field deleted) was read as no rows: a
    batch of that column alone came back empty (and compaction then committed no rows), beside other
    columns the read failed."""
    s = pa.struct([fld("x", pa.int32(), 2)])
    path = write(
        tmp_path, [fld("s", s, 1), fld("n", pa.int64(), 3)], {"s": [{"x": 1}, {"x": 2}], "n": [5, 6]}
    )
    alone = Schema((F(1, "s", it.StructType(())),))
    assert read(path, alone) == [{"s": {}}, {"s": {}}]
    both = Schema((F(1, "s", it.StructType(())), F(3, "n", it.LONG)))
    assert read(path, both) == [{"s": {}, "n": 5}, {"s": {}, "n": 6}]
