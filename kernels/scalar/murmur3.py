"""Murmur3 x86_32 (seed 0) as Iceberg's Appendix B defines it, on plain int64 arithmetic.

numba widens unsigned 32-bit arithmetic to 64 bits, so every step works on non-negative int64 values
below 2**32 and masks with ``& MASK32`` after each multiply or add. Products may wrap at 2**64; the
low 32 bits stay right. One signedness (int64) everywhere keeps numba from typing mixes as float64.
"""

from typing import Any

import numpy as np

from .._jit import Int, scalar

MASK32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_INT_MAX = 0x7FFFFFFF
_CANONICAL_NAN = 0x7FF8000000000000
_EXP_MASK = 0x7FF0000000000000
_MANTISSA_MASK = 0x000FFFFFFFFFFFFF


@scalar
def rotl32(x: Int, r: Int) -> Int:
    return ((x << r) | (x >> (32 - r))) & MASK32


@scalar
def mix_k1(k1: Int) -> Int:
    k1 = (k1 * _C1) & MASK32
    k1 = rotl32(k1, 15)
    return (k1 * _C2) & MASK32


@scalar
def mix_h1(h1: Int, k1: Int) -> Int:
    h1 ^= k1
    h1 = rotl32(h1, 13)
    return (h1 * 5 + 0xE6546B64) & MASK32


@scalar
def fmix32(h1: Int, length: Int) -> Int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & MASK32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & MASK32
    return h1 ^ (h1 >> 16)


@scalar
def finish(h: Int, buckets: Int) -> Int:
    """Unsigned 32-bit hash -> signed int32 hash (``buckets == 0``) or ``(h & INT_MAX) % buckets``."""
    if buckets > 0:
        return mod_positive(h & _INT_MAX, buckets)
    if h >= 0x80000000:
        return h - 0x100000000
    return h


@scalar
def mod_positive(x: Int, n: Int) -> Int:
    """``x % n`` for 0 <= x < 2**31 and 0 < n < 2**31, through a double reciprocal (vectorizes, unlike
    integer division). The quotient estimate is within 1 of the truth (relative error < 2**-50 on a
    quotient below 2**31, while a wrong floor needs an error of at least 1/n), so one correction
    step in each direction makes it exact."""
    q = np.int64(x * (1.0 / n))
    r = x - q * n
    if r < 0:
        r += n
    elif r >= n:
        r -= n
    return r


@scalar
def hash_long(v: Int) -> Int:
    """Unsigned hash of an 8-byte little-endian long (int, date, time and timestamps hash this way)."""
    v = np.int64(v)
    h1 = mix_h1(0, mix_k1(v & MASK32))
    h1 = mix_h1(h1, mix_k1((v >> 32) & MASK32))
    return fmix32(h1, 8)


@scalar
def hash_double_bits(bits: Int) -> Int:
    """Hash of a double given its IEEE-754 bits: NaN canonical, -0.0 hashed as 0.0."""
    if (bits & _EXP_MASK) == _EXP_MASK and (bits & _MANTISSA_MASK) != 0:
        bits = _CANONICAL_NAN
    elif (bits << 1) == 0:
        bits = 0
    return hash_long(bits)


@scalar
def hash_bytes(data: Any, start: Int, end: Int) -> Int:
    """Hash of ``data[start:end]`` (uint8), the x86_32 body with 4-byte little-endian blocks."""
    length = end - start
    nblocks = length // 4
    h1: Int = 0
    k1: Int = 0
    for b in range(nblocks):
        i = start + 4 * b
        k1 = (
            (data[i] & 0xFF)
            | ((data[i + 1] & 0xFF) << 8)
            | ((data[i + 2] & 0xFF) << 16)
            | ((data[i + 3] & 0xFF) << 24)
        )
        h1 = mix_h1(h1, mix_k1(k1))
    tail = start + 4 * nblocks
    rem = length & 3
    k1 = 0
    if rem == 3:
        k1 ^= (data[tail + 2] & 0xFF) << 16
    if rem >= 2:
        k1 ^= (data[tail + 1] & 0xFF) << 8
    if rem >= 1:
        k1 ^= data[tail] & 0xFF
        h1 ^= mix_k1(k1)
    return fmix32(h1, length)


@scalar
def _decimal_byte(lo: Int, hi: Int, index: Int) -> Int:
    """Byte ``index`` (0 = least significant) of the 128-bit two's-complement value hi:lo."""
    if index < 8:
        return (lo >> (8 * index)) & 0xFF
    return (hi >> (8 * (index - 8))) & 0xFF


@scalar
def decimal_min_bytes(lo: Int, hi: Int) -> Int:
    """Length of the minimal big-endian two's-complement encoding (Java's BigInteger.toByteArray)."""
    n = 16
    while n > 1:
        top = _decimal_byte(lo, hi, n - 1)
        next_sign = (_decimal_byte(lo, hi, n - 2) >> 7) & 1
        if (top == 0 and next_sign == 0) or (top == 0xFF and next_sign == 1):
            n -= 1
        else:
            break
    return n


@scalar
def hash_decimal128(lo: Int, hi: Int) -> Int:
    """Hash of the minimal big-endian bytes of the unscaled 128-bit value (lo, hi as int64 words)."""
    length = decimal_min_bytes(lo, hi)
    h1: Int = 0
    k1: Int = 0
    for pos in range(length):
        byte = _decimal_byte(lo, hi, length - 1 - pos)
        k1 |= byte << (8 * (pos & 3))
        if (pos & 3) == 3:
            h1 = mix_h1(h1, mix_k1(k1))
            k1 = 0
    if (length & 3) != 0:
        h1 ^= mix_k1(k1)
    return fmix32(h1, length)
