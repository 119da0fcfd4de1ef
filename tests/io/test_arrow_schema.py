"""The Arrow form of Iceberg schemas, checked against a hand-written table and against the Parquet schema
pyarrow writes for it (field ids at every depth, repetition from requiredness)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.errors import SchemaMismatch
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_schema import (
    FIELD_ID_KEY,
    constant_maker,
    default_maker,
    field_id_of,
    to_arrow_schema,
    to_arrow_type,
)

F = it.NestedField


@pytest.mark.parametrize(
    ("t", "arrow"),
    [
        (it.BOOLEAN, pa.bool_()),
        (it.INT, pa.int32()),
        (it.LONG, pa.int64()),
        (it.FLOAT, pa.float32()),
        (it.DOUBLE, pa.float64()),
        (it.decimal(9, 2), pa.decimal128(9, 2)),
        (it.decimal(38, 10), pa.decimal128(38, 10)),
        (it.DATE, pa.date32()),
        (it.TIME, pa.time64("us")),
        (it.TIMESTAMP, pa.timestamp("us")),
        (it.TIMESTAMPTZ, pa.timestamp("us", tz="UTC")),
        (it.TIMESTAMP_NS, pa.timestamp("ns")),
        (it.TIMESTAMPTZ_NS, pa.timestamp("ns", tz="UTC")),
        (it.STRING, pa.large_string()),
        (it.UUID, pa.binary(16)),
        (it.fixed(7), pa.binary(7)),
        (it.BINARY, pa.large_binary()),
        (it.UNKNOWN, pa.null()),
        (it.GeometryType("geometry"), pa.large_binary()),
        (it.GeographyType("geography"), pa.large_binary()),
        (
            it.VARIANT,
            pa.struct([pa.field("metadata", pa.large_binary(), False), pa.field("value", pa.large_binary())]),
        ),
    ],
)
def test_primitive_types(t: it.PrimitiveType, arrow: pa.DataType) -> None:
    assert to_arrow_type(t) == arrow


NESTED = Schema(
    (
        F(1, "id", it.LONG, required=True),
        F(2, "point", it.StructType((F(3, "x", it.DOUBLE, required=True), F(4, "y", it.DOUBLE)))),
        F(5, "tags", it.ListType(6, it.STRING, element_required=True)),
        F(7, "props", it.MapType(8, it.STRING, 9, it.ListType(10, it.INT), value_required=False)),
    )
)


def test_nested_names_nullability_and_ids() -> None:
    schema = to_arrow_schema(NESTED)
    assert schema.names == ["id", "point", "tags", "props"]
    assert [f.nullable for f in schema] == [False, True, True, True]
    assert [field_id_of(f) for f in schema] == [1, 2, 5, 7]
    point = schema.field("point").type
    assert [(f.name, f.nullable, field_id_of(f)) for f in point] == [("x", False, 3), ("y", True, 4)]
    tags = schema.field("tags").type
    assert pa.types.is_list(tags) and tags.value_field.name == "element"
    assert not tags.value_field.nullable and field_id_of(tags.value_field) == 6
    props = schema.field("props").type
    assert pa.types.is_map(props)
    assert (props.key_field.name, props.key_field.nullable, field_id_of(props.key_field)) == ("key", False, 8)
    assert (props.item_field.name, props.item_field.nullable, field_id_of(props.item_field)) == (
        "value",
        True,
        9,
    )
    assert field_id_of(props.item_field.type.value_field) == 10


def test_equal_schemas_share_their_arrow_schema() -> None:
    # made once: a scan asks for its read schema's once per file
    same = Schema((F(1, "id", it.LONG, True), F(2, "s", it.STRING, False)), schema_id=3)
    again = Schema((F(1, "id", it.LONG, True), F(2, "s", it.STRING, False)), schema_id=3)
    assert to_arrow_schema(same) is to_arrow_schema(again)
    renamed = Schema((F(1, "id", it.LONG, True), F(2, "t", it.STRING, False)), schema_id=3)
    assert to_arrow_schema(renamed).names == ["id", "t"]
    # a struct default is a dict: such a schema cannot be a key, its Arrow schema is made each time
    point = it.StructType((F(3, "x", it.INT, False),))
    with_default = Schema((F(1, "id", it.LONG, True), F(2, "p", point, False, initial_default={"3": 1})))
    assert to_arrow_schema(with_default) == to_arrow_schema(with_default)
    assert [f.name for f in to_arrow_schema(with_default).field("p").type] == ["x"]


def test_written_parquet_schema_carries_every_id(tmp_path: Path) -> None:
    """pyarrow's Parquet writer turns the schema into Iceberg's Appendix A layout (3-level list/map)."""
    path = tmp_path / "ids.parquet"
    pq.write_table(to_arrow_schema(NESTED).empty_table(), path)
    text = str(pq.ParquetFile(path).schema)
    ids = {int(m) for m in re.findall(r"field_id=(\d+)", text)}
    assert ids - {0} == set(NESTED.by_id) and "required int64 field_id=1 id" in text
    assert "repeated group field_id=-1 list" in text and "required binary field_id=6 element (String)" in text
    assert "required binary field_id=8 key (String)" in text


def test_field_id_of() -> None:
    assert field_id_of(pa.field("a", pa.int32())) is None
    assert field_id_of(pa.field("a", pa.int32(), metadata={FIELD_ID_KEY: b"x"})) is None
    assert field_id_of(pa.field("a", pa.int32(), metadata={FIELD_ID_KEY: b"12"})) == 12


def test_constant_and_default_columns() -> None:
    assert constant_maker(it.DATE, 19045)(2).to_pylist() == [dt.date(2022, 2, 22)] * 2
    assert constant_maker(it.decimal(6, 3), Decimal("123.321"))(1).to_pylist() == [Decimal("123.321")]
    assert constant_maker(it.STRING, None)(2).to_pylist() == [None, None]
    ts = F(1, "ts", it.TIMESTAMP, initial_default="1969-12-31T23:59:59.123456", has_initial_default=True)
    column = default_maker(ts, "f.parquet")(1)
    assert column.type == pa.timestamp("us") and column.cast(pa.int64()).to_pylist() == [-876_544]
    fixed = F(2, "f", it.fixed(5), initial_default="010203ff03", has_initial_default=True)
    assert default_maker(fixed, "f.parquet")(1).to_pylist() == [b"\x01\x02\x03\xff\x03"]
    nested = it.StructType(
        (F(4, "a", it.INT, initial_default=-1, has_initial_default=True), F(5, "b", it.STRING))
    )
    struct = F(3, "s", nested, initial_default={}, has_initial_default=True)
    assert default_maker(struct, "f.parquet")(2).to_pylist() == [{"a": -1, "b": None}] * 2
    listed = F(6, "l", it.ListType(7, it.LONG), initial_default=[1, 2], has_initial_default=True)
    assert default_maker(listed, "f.parquet")(1).to_pylist() == [[1, 2]]
    with pytest.raises(SchemaMismatch, match=r"f\.parquet: required field 'r' \(field id 8\)"):
        default_maker(F(8, "r", it.INT, required=True), "f.parquet")
