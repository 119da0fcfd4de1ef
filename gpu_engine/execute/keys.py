"""Equality-delete keys: key columns by field id, their 64-bit row hashes, and exact row comparison.

Hashing and the sorted-set lookup run in :mod:`gpu_engine.kernels.deletes` on the scan's backend; the
exact comparison that confirms each hash hit is columnar (Arrow compute) on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UnsupportedFeature
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..kernels import deletes as kd
from ..kernels import elementwise as ew
from .masks import DEVICE_LOCK


def arrow_type_of(schema: Schema, field_id: int) -> pa.DataType:
    t = schema.find_type(field_id)
    if not isinstance(t, it.PrimitiveType):
        raise UnsupportedFeature(
            f"equality delete column {field_id} has type {t}: only primitive columns can be keys"
        )
    return it.to_arrow(t)


def key_columns(batch: pa.RecordBatch, schema: Schema, ids: Sequence[int]) -> list[pa.Array]:
    """The key columns ``ids`` of ``batch`` (read with ``schema``); a null parent struct makes its
    children null."""
    out = []
    for field_id in ids:
        arrow_type_of(schema, field_id)
        path = schema.paths_by_id[field_id]
        col: pa.Array = batch.column(path[0])
        for name in path[1:]:
            col = pc.struct_field(col, name)
        out.append(col)
    return out


def _is_float(t: pa.DataType) -> bool:
    return bool(pa.types.is_floating(t))


def rows_equal(left: Sequence[pa.Array], right: Sequence[pa.Array]) -> np.ndarray:
    """Row-wise key equality of two equally long column lists: null equals null, floats by bits with
    every NaN equal."""
    n = len(left[0]) if left else 0
    same = np.ones(n, dtype=bool)
    for a, b in zip(left, right, strict=True):
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        if _is_float(a.type):
            bits = _float_bits(a), _float_bits(b)
            equal = pc.equal(*bits)
        else:
            equal = pc.equal(a, b)
        col = pc.or_(pc.fill_null(equal, False), both_null)
        same &= col.to_numpy(zero_copy_only=False)
    return same


def _float_bits(values: pa.Array) -> pa.Array:
    """Float values as unsigned integers of their bits, NaNs made one canonical NaN first."""
    width = np.uint32 if values.type == pa.float32() else np.uint64
    canonical = pc.if_else(pc.is_nan(values), pa.scalar(float("nan"), values.type), values)
    data = canonical.to_numpy(zero_copy_only=False)
    return pa.array(data.view(width), mask=pc.is_null(values).to_numpy(zero_copy_only=False))


def key_column(arr: pa.Array) -> kd.KeyColumn:
    """The kernel view of an Arrow key column (host buffers, zero copy except booleans, which are
    unpacked to one byte per value)."""
    t = arr.type
    if pa.types.is_boolean(t):
        arr = pc.cast(arr, pa.uint8())
        t = arr.type
    bufs = arr.buffers()
    validity = _bytes(bufs[0]) if bufs[0] is not None and arr.null_count else None
    if (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    ):
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        offsets = np.frombuffer(bufs[1], np.int64 if large else np.int32)
        return kd.KeyColumn.binary(_bytes(bufs[2]), offsets, validity, arr.offset)
    if pa.types.is_fixed_size_binary(t) or pa.types.is_decimal128(t):
        return kd.KeyColumn.fixed_bytes(_bytes(bufs[1]), t.byte_width, validity, arr.offset)
    if pa.types.is_null(t):
        return kd.KeyColumn.fixed(
            np.zeros(len(arr), np.int64), np.zeros(max(1, (len(arr) + 7) // 8), np.uint8)
        )
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t):
        width = t.bit_width // 8
        kind = (
            "f"
            if pa.types.is_floating(t)
            else ("u" if width == 1 and pa.types.is_unsigned_integer(t) else "i")
        )
        return kd.KeyColumn.fixed(np.frombuffer(bufs[1], np.dtype(f"<{kind}{width}")), validity, arr.offset)
    raise UnsupportedFeature(f"equality delete keys of Arrow type {t} are not supported")


def _bytes(buf: pa.Buffer | None) -> np.ndarray:
    return np.frombuffer(buf, np.uint8) if buf is not None and buf.size else np.zeros(1, np.uint8)


def _to_device(column: kd.KeyColumn) -> kd.KeyColumn:
    from numba import cuda

    def move(a: object) -> object:
        return None if a is None or not isinstance(a, np.ndarray) else cuda.to_device(np.ascontiguousarray(a))

    return replace(
        column,
        values=move(column.values),
        validity=move(column.validity),
        offsets=move(column.offsets),
    )


def row_hashes(columns: Sequence[pa.Array], n: int, backend: str) -> np.ndarray:
    """64-bit hash of each row's key (host uint64 array), computed on ``backend``."""
    key_cols = [key_column(c) for c in columns]
    if backend == "cuda":
        with DEVICE_LOCK:
            out = kd.hash_rows([_to_device(c) for c in key_cols], n)
            return np.asarray(out.copy_to_host(), dtype=np.uint64)
    return np.asarray(kd.hash_rows(key_cols, n), dtype=np.uint64)


def members(sorted_hashes: Any, directory: Any, hashes: np.ndarray, backend: str) -> np.ndarray:
    """Which ``hashes`` occur in ``sorted_hashes`` (bool mask; ``directory`` from
    :func:`~gpu_engine.kernels.deletes.directory_for`), computed on ``backend``. On ``cuda`` the sorted
    hashes and directory may already be on the device (see :func:`resident`)."""
    if backend == "cuda":
        from numba import cuda

        with DEVICE_LOCK:
            keys_d, directory_d = resident(sorted_hashes), resident(directory)
            out = kd.member_sorted(keys_d, cuda.to_device(hashes), directory=directory_d)
            return np.asarray(out.copy_to_host()).view(bool)
    return np.asarray(kd.member_sorted(sorted_hashes, hashes, directory=directory)).view(bool)


def resident(array: Any) -> Any:
    """``array`` on the device: itself when it is there already, else a copy."""
    from numba import cuda

    return array if ew.is_device_array(array) else cuda.to_device(array)
