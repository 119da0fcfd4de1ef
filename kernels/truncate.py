"""truncate[W] over Arrow-layout buffers: integers, decimal128 words, UTF-8 strings and binary."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, prange

from . import elementwise as ew
from ._jit import Int, scalar
from .scalar import truncate as tr
from .scan import offsets_from_lengths


@scalar
def _utf8_len(data: Any, start: Int, end: Int, code_points: Int) -> Int:
    return tr.utf8_prefix_end(data, start, end, code_points) - start


@scalar
def _binary_len(data: Any, start: Int, end: Int, length: Int) -> Int:
    return tr.binary_prefix_end(start, end, length) - start


@scalar
def _copy_prefix(dst: Any, dst_start: Int, dst_end: Int, src: Any, src_start: Int) -> None:
    for k in range(dst_end - dst_start):
        dst[dst_start + k] = src[src_start + k]


def _copy_cpu(n, dst, dst_offsets, src, src_offsets):  # type: ignore[no-untyped-def]
    for i in prange(n):
        _copy_prefix(dst, dst_offsets[i], dst_offsets[i + 1], src, src_offsets[i])


_copy_prefix_device = ew.device_fn(_copy_prefix)


def _copy_cuda(n, dst, dst_offsets, src, src_offsets):  # type: ignore[no-untyped-def]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        _copy_prefix_device(dst, dst_offsets[i], dst_offsets[i + 1], src, src_offsets[i])


_OFFSET_SIGS = tuple(f"void(int64, {t}[::1], uint8[::1], {t}[::1], int64)" for t in ("int32", "int64"))
INT32 = ew.fixed("truncate_int32", tr.truncate_int32, ("void(int64, int32[::1], int32[::1], int64)",))
INT64 = ew.fixed("truncate_int64", tr.truncate_integer, ("void(int64, int64[::1], int64[::1], int64)",))
DECIMAL128 = ew.pairs_to_pairs(
    "truncate_decimal128", tr.truncate_decimal128, ("void(int64, int64[::1], int64[::1], int64)",)
)
UTF8_LENGTHS = ew.ranges("truncate_utf8_lengths", _utf8_len, _OFFSET_SIGS)
BINARY_LENGTHS = ew.ranges("truncate_binary_lengths", _binary_len, _OFFSET_SIGS)
COPY_PREFIXES = ew.ElementwiseKernel.build(
    "copy_prefixes",
    _copy_cpu,
    _copy_cuda,
    tuple(f"void(int64, uint8[::1], {t}[::1], uint8[::1], {t}[::1])" for t in ("int32", "int64")),
)
KERNELS = (INT32, INT64, DECIMAL128, UTF8_LENGTHS, BINARY_LENGTHS, COPY_PREFIXES)


def truncate_integers(values: Any, width: int) -> Any:
    """int/long values -> ``v - floormod(v, width)`` in the values' own dtype (wrapping like Java)."""
    n = values.shape[0]
    out = ew.empty(values, n, values.dtype)
    (INT32 if values.dtype == np.int32 else INT64)(n, out, values, width)
    return out


def truncate_decimal128(words: Any, width: int) -> Any:
    """decimal128 words (2n int64) -> truncated words; ``width`` applies to the unscaled value."""
    out = ew.empty(words, words.shape[0], np.int64)
    DECIMAL128(words.shape[0] // 2, out, words, width)
    return out


def _truncate_ranges(kernel: ew.ElementwiseKernel, data: Any, offsets: Any, width: int) -> tuple[Any, Any]:
    n = offsets.shape[0] - 1
    lengths = ew.empty(offsets, n, offsets.dtype)
    kernel(n, lengths, data, offsets, width)
    new_offsets = offsets_from_lengths(lengths, offsets.dtype)
    total = int(ew.as_host(new_offsets[n : n + 1])[0])
    new_data = ew.empty(data, total, np.uint8)
    COPY_PREFIXES(n, new_data, new_offsets, data, offsets)
    return new_data, new_offsets


def truncate_utf8(data: Any, offsets: Any, code_points: int) -> tuple[Any, Any]:
    """Strings -> (data, offsets) of prefixes with at most ``code_points`` code points (valid UTF-8)."""
    return _truncate_ranges(UTF8_LENGTHS, data, offsets, code_points)


def truncate_binary(data: Any, offsets: Any, length: int) -> tuple[Any, Any]:
    """Binary -> (data, offsets) of the first ``length`` bytes of each value."""
    return _truncate_ranges(BINARY_LENGTHS, data, offsets, length)
