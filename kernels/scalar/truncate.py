"""truncate[W] per element: integers with a non-negative remainder, 128-bit decimals, UTF-8 prefixes."""

import numpy as np
from numpy.typing import NDArray

from .._jit import Int, scalar

_LIMB = 0xFFFFFFFF


@scalar
def truncate_integer(v: Int, width: Int) -> Int:
    """``v - (((v % W) + W) % W)`` (the spec's form; also right where % follows the dividend's sign)."""
    v = np.int64(v)
    return v - (((v % width) + width) % width)


@scalar
def wrap_int32(v: Int) -> Int:
    """The low 32 bits of ``v`` as a signed int: Java's ``(int)`` cast (written out, so a CUDA kernel
    and its simulator give what the CPU loop's narrowing store gives)."""
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@scalar
def truncate_int32(v: Int, width: Int) -> Int:
    """:func:`truncate_integer` wrapped to 32 bits, as Java's int arithmetic wraps (INT32_MIN - r)."""
    return wrap_int32(truncate_integer(v, width))


@scalar
def _mod_u128(lo: Int, hi: Int, width: Int) -> Int:
    """(hi:lo as an unsigned 128-bit magnitude) mod width, for 0 < width < 2**31, by 32-bit limbs."""
    rem: Int = 0
    for shift in (32, 0):
        rem = ((rem << 32) | ((hi >> shift) & _LIMB)) % width
    for shift in (32, 0):
        rem = ((rem << 32) | ((lo >> shift) & _LIMB)) % width
    return rem


@scalar
def _negate128(lo: Int, hi: Int) -> tuple[Int, Int]:
    nlo = ~lo + 1
    nhi = ~hi
    if nlo == 0:
        nhi += 1
    return nlo, nhi


@scalar
def _sub_small128(lo: Int, hi: Int, r: Int) -> tuple[Int, Int]:
    """(hi:lo) - r for 0 <= r < 2**31, with the borrow taken as an unsigned compare of the low words."""
    nlo = lo - r
    # borrow when unsigned(lo) < r: flip the sign bits to compare unsigned values as signed ones
    if (lo ^ np.int64(-0x8000000000000000)) < (r ^ np.int64(-0x8000000000000000)):
        return nlo, hi - 1
    return nlo, hi


@scalar
def truncate_decimal128(lo: Int, hi: Int, width: Int) -> tuple[Int, Int]:
    """Unscaled 128-bit value minus its floor remainder by ``width`` (scale is the column's)."""
    lo = np.int64(lo)
    hi = np.int64(hi)
    if hi < 0:
        mlo, mhi = _negate128(lo, hi)
        r = _mod_u128(mlo, mhi, width)
        if r != 0:
            r = width - r
    else:
        r = _mod_u128(lo, hi, width)
    return _sub_small128(lo, hi, r)


@scalar
def utf8_prefix_end(data: NDArray[np.uint8], start: Int, end: Int, code_points: Int) -> Int:
    """End offset of the longest prefix of ``data[start:end]`` with at most ``code_points`` code points."""
    count = 0
    i = start
    while i < end:
        if (data[i] & 0xC0) != 0x80:  # a lead byte starts a code point
            if count == code_points:
                return i
            count += 1
        i += 1
    return end


@scalar
def binary_prefix_end(start: Int, end: Int, length: Int) -> Int:
    """End offset of the first ``length`` bytes of ``[start, end)``."""
    return min(end, start + length)
