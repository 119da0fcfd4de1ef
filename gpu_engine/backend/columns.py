"""Arrow-layout columns whose buffers live on the host (NumPy) or the device (numba/CuPy/cuDF memory).

A :class:`Column` is the unit handed to kernels: values already sliced to the column's window, a validity
bitmap re-packed to start at bit 0, offsets for variable-length values. Moving it between host and
device copies buffers and nothing else; kernels run wherever the buffers are.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from numba import cuda

from ..errors import InvalidType
from ..kernels import validity
from ..kernels.elementwise import as_device_array, as_host, is_device_array


class Layout(enum.Enum):
    """How a column's values are stored, which picks the kernel entry point."""

    NULL = "null"  # no value buffer
    BITS = "bits"  # booleans: LSB-first bitmap from bit 0
    FIXED = "fixed"  # fixed-width numbers, one NumPy dtype
    WORDS128 = "words128"  # decimal128: two little-endian int64 words per value
    VARLEN = "varlen"  # string/binary: n + 1 offsets into a byte buffer
    FIXED_BYTES = "fixed_bytes"  # fixed_size_binary(width): n * width bytes


def layout_of(arrow_type: pa.DataType) -> Layout:
    if pa.types.is_null(arrow_type):
        return Layout.NULL
    if pa.types.is_boolean(arrow_type):
        return Layout.BITS
    if pa.types.is_decimal128(arrow_type):
        return Layout.WORDS128
    if pa.types.is_fixed_size_binary(arrow_type):
        return Layout.FIXED_BYTES
    if arrow_type in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()):
        return Layout.VARLEN
    if pa.types.is_primitive(arrow_type):
        return Layout.FIXED
    raise InvalidType(f"Arrow type {arrow_type} has no flat column layout")


def physical_dtype(arrow_type: pa.DataType) -> np.dtype[Any]:
    """NumPy dtype of a fixed-width Arrow type's value buffer (dates and times are plain integers)."""
    bits = arrow_type.bit_width
    if pa.types.is_floating(arrow_type):
        return np.dtype(f"float{bits}")
    if pa.types.is_unsigned_integer(arrow_type):
        return np.dtype(f"uint{bits}")
    return np.dtype(f"int{bits}")


@dataclass(frozen=True)
class Column:
    """One flat Arrow-layout column on the host or the device."""

    type: pa.DataType
    length: int
    null_count: int
    data: Any  # values (FIXED/WORDS128), bytes (VARLEN/FIXED_BYTES), bitmap (BITS), None (NULL)
    validity: Any = None  # uint8 bitmap from bit 0, None when there are no nulls
    offsets: Any = None  # VARLEN: n + 1 absolute offsets into ``data``

    @property
    def layout(self) -> Layout:
        return layout_of(self.type)

    @property
    def on_device(self) -> bool:
        return is_device_array(self.data if self.data is not None else self.validity)

    @property
    def fixed_width(self) -> int:
        return int(self.type.byte_width)

    def to_device(self) -> Column:
        """A copy with every buffer in device memory (no-op when already there)."""
        return _map_buffers(
            self, lambda b: b if is_device_array(b) else cuda.to_device(np.ascontiguousarray(b))
        )

    def to_host(self) -> Column:
        """A copy with every buffer in host memory (no-op when already there)."""
        return _map_buffers(self, as_host)

    @staticmethod
    def from_cuda(
        arrow_type: pa.DataType,
        data: Any,
        *,
        length: int | None = None,
        validity: Any = None,
        null_count: int | None = None,
        offsets: Any = None,
    ) -> Column:
        """Wrap device buffers (CuPy arrays or any ``__cuda_array_interface__`` object) without copying.

        ``data`` holds the values (int64 words for decimal128, bytes for binary kinds, a bitmap for
        booleans); ``validity`` is an LSB-first uint8 bitmap starting at bit 0.
        """
        wrap = as_device_array
        data = wrap(data)
        offsets = wrap(offsets) if offsets is not None else None
        bitmap = wrap(validity) if validity is not None else None
        layout = layout_of(arrow_type)
        if length is None:
            if layout is Layout.VARLEN:
                length = offsets.shape[0] - 1
            elif layout is Layout.WORDS128:
                length = data.shape[0] // 2
            elif layout is Layout.FIXED_BYTES:
                length = data.shape[0] // arrow_type.byte_width
            elif layout is Layout.FIXED:
                length = data.shape[0]
            else:
                raise InvalidType(f"Column.from_cuda({arrow_type}): pass length= for this layout")
        if bitmap is None:
            null_count = 0
        elif null_count is None:
            host_bits = np.unpackbits(as_host(bitmap), bitorder="little")[:length]
            null_count = int(length - host_bits.sum())
        return Column(arrow_type, length, null_count, data, bitmap, offsets)


def _map_buffers(col: Column, move: Any) -> Column:
    return replace(
        col,
        data=move(col.data) if col.data is not None else None,
        validity=move(col.validity) if col.validity is not None else None,
        offsets=move(col.offsets) if col.offsets is not None else None,
    )


def _np(buffer: pa.Buffer | None, dtype: Any) -> np.ndarray[Any, Any]:
    if buffer is None:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(buffer, dtype=dtype)


def from_arrow(array: pa.Array) -> Column:
    """Zero-copy host view of a flat Arrow array (validity re-packed only for unaligned slices)."""
    n, off = len(array), array.offset
    buffers = array.buffers()
    bitmap = None
    if array.null_count and buffers[0] is not None:
        bitmap = validity.repack(_np(buffers[0], np.uint8), off, n)
    layout = layout_of(array.type)
    offsets = None
    if layout is Layout.NULL:
        return Column(array.type, n, n, None, np.zeros((n + 7) // 8, np.uint8))
    if layout is Layout.BITS:
        data = validity.repack(_np(buffers[1], np.uint8), off, n)
    elif layout is Layout.FIXED:
        data = _np(buffers[1], physical_dtype(array.type))[off : off + n]
    elif layout is Layout.WORDS128:
        data = _np(buffers[1], np.int64)[2 * off : 2 * (off + n)]
    elif layout is Layout.FIXED_BYTES:
        w = array.type.byte_width
        data = _np(buffers[1], np.uint8)[w * off : w * (off + n)]
    else:
        large = array.type in (pa.large_string(), pa.large_binary())
        offsets = _np(buffers[1], np.int64 if large else np.int32)[off : off + n + 1]
        data = _np(buffers[2], np.uint8)
    return Column(array.type, n, array.null_count, data, bitmap, offsets)


def to_arrow(col: Column) -> pa.Array:
    """An Arrow array over the column's (host) buffers; device columns are copied to the host first."""
    col = col.to_host()
    valid = pa.py_buffer(col.validity) if col.validity is not None and col.null_count else None
    layout = col.layout
    if layout is Layout.NULL:
        return pa.nulls(col.length, col.type)
    if layout is Layout.VARLEN:
        buffers = [valid, pa.py_buffer(col.offsets), pa.py_buffer(col.data)]
        return pa.Array.from_buffers(col.type, col.length, buffers, col.null_count)
    return pa.Array.from_buffers(col.type, col.length, [valid, pa.py_buffer(col.data)], col.null_count)
