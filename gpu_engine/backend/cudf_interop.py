"""cuDF Series <-> device :class:`Column`, zero-copy through pylibcudf (cuDF >= 25.x).

cuDF keeps Arrow's layouts on the device (LSB-first null masks, int32/int64 string offsets with the
characters in the parent's data buffer, decimal128 as two little-endian words), so a Column views the
same memory. cuDF's decimal scale is negative (value = unscaled * 10**scale); Arrow's is positive.
Types cuDF stores differently from Arrow (BOOL8 bytes, decimal32/64) are refused with an explicit error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .._deps import require
from ..errors import UnsupportedFeature
from ..kernels.elementwise import as_device_array, empty
from .columns import Column, Layout, layout_of, physical_dtype

_MASK_ALIGN = 64  # libcudf pads null masks to 64 bytes


def is_cudf(values: object) -> bool:
    """True for cudf.Series (checked by module so cuDF is not imported when absent)."""
    return type(values).__module__.startswith("cudf") and hasattr(values, "to_pylibcudf")


def _arrow_type(plc: Any, dtype: Any) -> pa.DataType:
    tid = plc.TypeId
    simple = {
        tid.INT8: pa.int8(),
        tid.INT16: pa.int16(),
        tid.INT32: pa.int32(),
        tid.INT64: pa.int64(),
        tid.FLOAT32: pa.float32(),
        tid.FLOAT64: pa.float64(),
        tid.TIMESTAMP_DAYS: pa.date32(),
        tid.TIMESTAMP_MICROSECONDS: pa.timestamp("us"),
        tid.TIMESTAMP_NANOSECONDS: pa.timestamp("ns"),
        tid.DURATION_MICROSECONDS: pa.time64("us"),
        tid.STRING: pa.string(),
    }
    if dtype.id() in simple:
        return simple[dtype.id()]
    if dtype.id() == tid.DECIMAL128:
        return pa.decimal128(38, -dtype.scale())
    raise UnsupportedFeature(f"cuDF columns of type {dtype.id()!r} are not supported here; cast them first")


def from_cudf(series: Any) -> Column:
    """View a cudf.Series as a device Column (no copy, except re-packing a mask at a bit offset)."""
    plc = require("pylibcudf", "reading cuDF columns")
    col, _ = series.to_pylibcudf()
    arrow_type = _arrow_type(plc, col.type())
    n, off = col.size(), col.offset()
    mask = col.null_mask()
    validity = None
    if mask is not None and col.null_count():
        from ..kernels import validity as kvalidity

        validity = kvalidity.repack(as_device_array(mask).view(np.uint8), off, n)
    offsets = None
    layout = layout_of(arrow_type)
    if layout is Layout.VARLEN:
        child = col.children()[0]
        odt = np.int64 if child.type().id() == plc.TypeId.INT64 else np.int32
        offsets = as_device_array(child.data()).view(odt)[off : off + n + 1]
        chars = col.data()  # None for a column of only empty strings
        raw = empty(offsets, 0, np.uint8) if chars is None else as_device_array(chars).view(np.uint8)
        return Column(arrow_type, n, col.null_count(), raw, validity, offsets)
    data = as_device_array(col.data()).view(np.uint8)
    if layout is Layout.WORDS128:
        data = data.view(np.int64)[2 * off : 2 * (off + n)]
    else:
        data = data.view(physical_dtype(arrow_type))[off : off + n]
    return Column(arrow_type, n, col.null_count(), data, validity)


def to_cudf(column: Column) -> Any:
    """A cudf.Series over a device Column's buffers (fixed-width, decimal128 and string layouts)."""
    plc = require("pylibcudf", "returning cuDF columns")
    cudf = require("cudf", "returning cuDF columns")
    tid = plc.TypeId
    by_arrow = {
        pa.int32(): tid.INT32,
        pa.int64(): tid.INT64,
        pa.float32(): tid.FLOAT32,
        pa.float64(): tid.FLOAT64,
        pa.date32(): tid.TIMESTAMP_DAYS,
        pa.timestamp("us"): tid.TIMESTAMP_MICROSECONDS,
        pa.timestamp("ns"): tid.TIMESTAMP_NANOSECONDS,
        pa.time64("us"): tid.DURATION_MICROSECONDS,
    }
    view = plc.gpumemoryview
    mask = None
    if column.validity is not None and column.null_count:
        nbytes = -(-column.validity.shape[0] // _MASK_ALIGN) * _MASK_ALIGN
        padded = empty(column.validity, nbytes, np.uint8)
        padded[: column.validity.shape[0]].copy_to_device(column.validity)
        mask = view(padded)
    children = []
    layout = column.layout
    if layout is Layout.VARLEN:
        if column.type not in (pa.string(), pa.large_string()):
            raise UnsupportedFeature(f"cuDF has no {column.type} columns; only strings are returned as cuDF")
        otid = tid.INT64 if column.offsets.dtype == np.int64 else tid.INT32
        offsets = plc.Column(plc.DataType(otid), column.length + 1, view(column.offsets), None, 0, 0, [])
        dtype, children = plc.DataType(tid.STRING), [offsets]
    elif layout is Layout.WORDS128:
        dtype = plc.DataType(tid.DECIMAL128, -column.type.scale)
    elif column.type in by_arrow or pa.types.is_timestamp(column.type):
        key = pa.timestamp(column.type.unit) if pa.types.is_timestamp(column.type) else column.type
        dtype = plc.DataType(by_arrow[key])
    else:
        raise UnsupportedFeature(f"cuDF has no column type for Arrow {column.type}")
    col = plc.Column(dtype, column.length, view(column.data), mask, column.null_count, 0, children)
    return cudf.Series.from_pylibcudf(col)
