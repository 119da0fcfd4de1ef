"""Murmur3 hashes and bucket[N] over Arrow-layout buffers, one entry point per physical layout.

``buckets=0`` returns the signed 32-bit hash; ``buckets=N > 0`` returns ``(hash & INT_MAX) % N``.
Outputs are int32 arrays on the side (host or device) of the inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import elementwise as ew
from ._jit import Int, scalar
from .scalar import murmur3 as m3
from .scalar.temporal import micros_from_nanos


@scalar
def _long(v: Int, buckets: Int) -> Int:
    return m3.finish(m3.hash_long(v), buckets)


@scalar
def _nanos(v: Int, buckets: Int) -> Int:
    return m3.finish(m3.hash_long(micros_from_nanos(v)), buckets)


@scalar
def _double_bits(v: Int, buckets: Int) -> Int:
    return m3.finish(m3.hash_double_bits(v), buckets)


@scalar
def _decimal(lo: Int, hi: Int, buckets: Int) -> Int:
    return m3.finish(m3.hash_decimal128(lo, hi), buckets)


@scalar
def _bytes(data: Any, start: Int, end: Int, buckets: Int) -> Int:
    return m3.finish(m3.hash_bytes(data, start, end), buckets)


_FIXED_SIGS = tuple(f"void(int64, int32[::1], {t}[::1], int64)" for t in ("int32", "int64"))
LONG = ew.fixed("hash_long", _long, _FIXED_SIGS)
NANOS = ew.fixed("hash_timestamp_ns", _nanos, _FIXED_SIGS[1:])
DOUBLE_BITS = ew.fixed("hash_double_bits", _double_bits, _FIXED_SIGS[1:])
DECIMAL128 = ew.pairs("hash_decimal128", _decimal, _FIXED_SIGS[1:])
BYTES = ew.ranges(
    "hash_bytes",
    _bytes,
    tuple(f"void(int64, int32[::1], uint8[::1], {t}[::1], int64)" for t in ("int32", "int64")),
)
FIXED_BYTES = ew.strided("hash_fixed_bytes", _bytes, ("void(int64, int32[::1], uint8[::1], int64, int64)",))
BOOLEAN = ew.bits("hash_boolean", _long, ("void(int64, int32[::1], uint8[::1], int64, int64)",))


def _out(like: Any, n: int) -> Any:
    return ew.empty(like, n, np.int32)


def hash_longs(values: Any, buckets: int = 0) -> Any:
    """int, long, date, time, timestamp(tz) values (int32 or int64), hashed as 8-byte longs."""
    n = values.shape[0]
    out = _out(values, n)
    LONG(n, out, values, buckets)
    return out


def hash_timestamp_nanos(values: Any, buckets: int = 0) -> Any:
    """timestamp_ns(tz) values (int64 nanoseconds), floored to microseconds before hashing."""
    n = values.shape[0]
    out = _out(values, n)
    NANOS(n, out, values, buckets)
    return out


def hash_double_bits(bits: Any, buckets: int = 0) -> Any:
    """Doubles given as their int64 bit patterns (a zero-copy view); floats must be widened first."""
    n = bits.shape[0]
    out = _out(bits, n)
    DOUBLE_BITS(n, out, bits, buckets)
    return out


def hash_decimal128(words: Any, buckets: int = 0) -> Any:
    """decimal128 values as 2n little-endian int64 words (low word first)."""
    n = words.shape[0] // 2
    out = _out(words, n)
    DECIMAL128(n, out, words, buckets)
    return out


def hash_binary(data: Any, offsets: Any, buckets: int = 0) -> Any:
    """string (UTF-8 bytes) and binary values: data bytes plus ``n + 1`` offsets."""
    n = offsets.shape[0] - 1
    out = _out(offsets, n)
    BYTES(n, out, data, offsets, buckets)
    return out


def hash_fixed(data: Any, width: int, n: int, buckets: int = 0) -> Any:
    """uuid (16 big-endian bytes) and fixed[L] values: ``n * width`` contiguous bytes."""
    out = _out(data, n)
    FIXED_BYTES(n, out, data, width, buckets)
    return out


def hash_booleans(bitmap: Any, bit_offset: int, n: int, buckets: int = 0) -> Any:
    """Booleans as an LSB-first bitmap; true hashes as hashInt(1), false as hashInt(0)."""
    out = _out(bitmap, n)
    BOOLEAN(n, out, bitmap, bit_offset, buckets)
    return out


@scalar
def _widen(v: float, _unused: Int) -> float:
    return np.float64(v)


WIDEN_FLOAT = ew.fixed("widen_float", _widen, ("void(int64, float64[::1], float32[::1], int64)",))
KERNELS = (LONG, NANOS, DOUBLE_BITS, DECIMAL128, BYTES, FIXED_BYTES, BOOLEAN, WIDEN_FLOAT)


def hash_floats(values: Any, buckets: int = 0) -> Any:
    """float or double values: hashed as ``doubleToLongBits(double(v))`` (floats widened first)."""
    if values.dtype == np.float32:
        wide = ew.empty(values, values.shape[0], np.float64)
        WIDEN_FLOAT(values.shape[0], wide, values, 0)
        values = wide
    return hash_double_bits(values.view(np.int64), buckets)
