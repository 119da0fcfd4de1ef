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
