"""Arrow arrays <-> Columns: zero-copy views, sliced arrays, validity re-packing, device round trips."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from gpu_engine.backend import columns
from gpu_engine.errors import InvalidType

ARRAYS = [
    pa.array([1, None, 3, 4, None, 6, 7, 8, 9, None], pa.int64()),
    pa.array([1, None, 3], pa.int32()),
    pa.array([True, None, False, True, True, False, None, True, False, True]),
    pa.array(["a", None, "ccc", "", "ünï", "😀"]),
    pa.array([b"a", None, b"\xff\x00"], pa.large_binary()),
    pa.array([b"abcd", None, b"efgh"], pa.binary(4)),
    pa.array([Decimal("1.50"), None, Decimal("-3.25")], pa.decimal128(9, 2)),
    pa.array([1.5, None, -0.0], pa.float32()),
    pa.nulls(5, pa.int64()),
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: str(a.type))
@pytest.mark.parametrize("window", [(0, None), (1, None), (3, 5), (2, 0)])
def test_round_trip_of_slices(array: pa.Array, window: tuple[int, int | None]) -> None:
    start, length = window
    sliced = array.slice(start, length)
    back = columns.to_arrow(columns.from_arrow(sliced))
    back.validate(full=True)
    assert back.equals(sliced)


@pytest.mark.gpu
@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: str(a.type))
def test_device_round_trip(array: pa.Array) -> None:
    col = columns.from_arrow(array.slice(1))
    on_device = col.to_device()
    assert on_device.on_device and not col.on_device
    assert columns.to_arrow(on_device).equals(array.slice(1))


@pytest.mark.gpu
def test_from_cuda_wraps_device_buffers() -> None:
    import numpy as np
    from numba import cuda

    values = cuda.to_device(np.array([5, 6, 7], np.int64))
    valid = cuda.to_device(np.array([0b101], np.uint8))
    col = columns.Column.from_cuda(pa.int64(), values, validity=valid)
    assert (col.length, col.null_count) == (3, 1)
    assert columns.to_arrow(col).to_pylist() == [5, None, 7]


def test_nested_types_have_no_flat_layout() -> None:
    with pytest.raises(InvalidType, match="list<item: int64>"):
        columns.layout_of(pa.list_(pa.int64()))
