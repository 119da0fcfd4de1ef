"""conform_batch: Arrow data as the table writes it, or a SchemaMismatch naming the column."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import SchemaMismatch
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_conform import conform_batch

F = it.NestedField


def test_a_struct_naming_a_field_twice_is_refused() -> None:
    """Fields match by name: of two children called ``a`` one would be dropped without a word."""
    schema = Schema((F(1, "st", it.StructType((F(2, "a", it.LONG), F(3, "b", it.LONG))), False),))
    st = pa.StructArray.from_arrays([pa.array([1]), pa.array([2]), pa.array([3])], names=["a", "a", "b"])
    with pytest.raises(SchemaMismatch, match=r"column st\.'a' appears twice"):
        conform_batch(pa.record_batch({"st": st}), schema)


def test_required_elements_and_values_under_a_null_parent_may_hold_nulls() -> None:
    """A null in a required list element or map value is refused only where its struct is not null (the
    data beneath a null struct is never read: Parquet's levels make it null)."""
    element = it.ListType(4, it.LONG, element_required=True)
    value = it.MapType(5, it.STRING, 6, it.LONG, value_required=True)
    inner = it.StructType((F(2, "l", element), F(3, "m", value)))
    schema = Schema((F(1, "st", inner),))
    lists = pa.array([[None], [1, 2]], pa.list_(pa.int64()))
    maps = pa.array([[("k", None)], [("k", 3)]], pa.map_(pa.string(), pa.int64()))
    st = pa.StructArray.from_arrays([lists, maps], names=["l", "m"], mask=pa.array([True, False]))
    out = conform_batch(pa.record_batch({"st": st}), schema)
    assert out.column(0).to_pylist() == [None, {"l": [1, 2], "m": [("k", 3)]}]
    live = pa.StructArray.from_arrays([lists, maps], names=["l", "m"])  # the same nulls where read
    with pytest.raises(SchemaMismatch, match=r"column 'st\.l\.element' is required but 1 of its values"):
        conform_batch(pa.record_batch({"st": live}), schema)


def test_a_null_typed_column_fills_a_struct_with_required_fields() -> None:
    """pandas' empty columns (Arrow null type) stand for any type: for an optional struct holding a required
    field too, its nulls lie under the null struct (the Parquet writer refused a required leaf of nulls)."""
    schema = Schema(
        (
            F(1, "c", it.StructType((F(2, "x", it.LONG, True),))),
            F(3, "l", it.ListType(4, it.StructType((F(5, "x", it.LONG, True),)), element_required=False)),
        )
    )
    out = conform_batch(pa.record_batch({"c": pa.nulls(2), "l": pa.nulls(2)}), schema)
    assert out.column(0).to_pylist() == [None, None] and out.column(1).to_pylist() == [None, None]
    assert out.column(0).field(0).null_count == 0 and out.schema.field("c").type.field("x").nullable is False


def test_values_for_an_unknown_column_are_refused() -> None:
    """v3's unknown type holds only nulls and is never written: values given for it would be lost."""
    schema = Schema(
        (F(1, "n", it.UNKNOWN), F(2, "s", it.StructType((F(3, "a", it.INT), F(4, "u", it.UNKNOWN)))))
    )
    conform_batch(pa.record_batch({"n": pa.nulls(1), "s": pa.array([{"a": 1, "u": None}])}), schema)
    with pytest.raises(SchemaMismatch, match=r"column 'n' has type unknown, which holds only nulls"):
        conform_batch(pa.record_batch({"n": pa.array([5])}), schema)
    with pytest.raises(SchemaMismatch, match=r"column 's.u' has type unknown"):
        conform_batch(pa.record_batch({"s": pa.array([{"a": 1, "u": "hello"}])}), schema)
    hidden = pa.StructArray.from_arrays(
        [pa.array([1]), pa.array(["x"])], names=["a", "u"], mask=pa.array([True])
    )
    conform_batch(pa.record_batch({"s": hidden}), schema)  # under a null struct: never read


def test_times_outside_the_day_are_refused() -> None:
    schema = Schema((F(1, "t", it.TIME),))
    conform_batch(pa.record_batch({"t": pa.array([0, 86_399], pa.time32("s"))}), schema)
    for bad in ([86_400], [-5]):
        with pytest.raises(SchemaMismatch, match=r"column 't': time values outside 00:00-24:00"):
            conform_batch(pa.record_batch({"t": pa.array(bad, pa.time32("s"))}), schema)
    nested = Schema((F(2, "s", it.StructType((F(3, "t", it.TIME, True),))),))
    times = pa.array([3_600_000_000, -5], pa.time64("us"))  # -5 under a null struct: never read
    hidden = pa.StructArray.from_arrays([times], names=["t"], mask=pa.array([False, True]))
    assert conform_batch(pa.record_batch({"s": hidden}), nested).column(0).to_pylist()[1] is None
