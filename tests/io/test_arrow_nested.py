"""list_values: the elements of list and map arrays, also where pyarrow cannot flatten them (an empty
child of an extension type), as arrays of exactly the element type."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.io.arrow_nested import empty, list_values, struct_array

UUID_MAP = pa.map_(pa.uuid(), pa.int64())
NESTED = [
    pa.list_(pa.uuid()),
    UUID_MAP,
    pa.list_(pa.list_(pa.uuid())),
    pa.list_(UUID_MAP),
    pa.map_(pa.string(), UUID_MAP),
    pa.list_(pa.struct([pa.field("u", pa.uuid()), pa.field("n", pa.int32())])),
]


@pytest.mark.parametrize("t", NESTED, ids=str)
def test_no_elements_give_an_empty_array_of_the_element_type(t: pa.DataType) -> None:
    lists = _nulls(t)
    got = list_values(lists)
    assert len(got) == 0
    want = pa.struct([t.key_field, t.item_field]) if pa.types.is_map(t) else t.value_type
    assert got.type == want
    got.validate(full=True)


@pytest.mark.parametrize("t", [pa.uuid(), *NESTED], ids=str)
def test_empty_arrays_of_any_type(t: pa.DataType) -> None:
    arr = empty(t)
    assert len(arr) == 0 and arr.type == t
    arr.validate(full=True)


def test_elements_are_flattened_as_pyarrow_does() -> None:
    lists = pa.array([[1, 2], None, [], [3]], pa.list_(pa.int64()))
    assert list_values(lists).to_pylist() == [1, 2, 3]
    maps = pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int64()))
    assert list_values(maps).to_pylist() == [{"key": "a", "value": 1}]


def _nulls(t: pa.DataType) -> pa.Array:
    """Two null lists (maps) of type ``t`` (pa.array cannot make them either)."""
    offsets, mask = pa.array([0, 0, 0], pa.int32()), pa.array([True, True])
    if isinstance(t, pa.MapType):
        return pa.MapArray.from_arrays(offsets, empty(t.key_type), empty(t.item_type), type=t, mask=mask)
    return pa.ListArray.from_arrays(offsets, empty(t.value_type), type=t, mask=mask)


@pytest.mark.parametrize("nulls", [None, [False, True, False]])
def test_a_struct_without_fields_keeps_its_rows(nulls: list[bool] | None) -> None:
    """pyarrow's StructArray.from_arrays of no children has no rows, whatever the rows asked for."""
    mask = None if nulls is None else pa.array(nulls)
    got = struct_array([], [], 3, mask)
    assert len(got) == 3 and got.type == pa.struct([])
    assert got.to_pylist() == ([{}, {}, {}] if nulls is None else [{}, None, {}])
    child = pa.array([1, 2, 3])
    assert struct_array([child], [pa.field("x", pa.int64())], 3, mask).to_pylist()[0] == {"x": 1}
