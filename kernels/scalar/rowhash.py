"""64-bit row hashing for equality deletes: per-value hashes and an order-dependent column combine.

Everything here is uint64 arithmetic (wrapping at 2**64): constants are ``np.uint64`` and inputs are
cast first, because numba types a uint64 mixed with a signed int as float64.

- Integers (any signed width, uint8 booleans) hash as their value sign-extended to int64, so an ``int``
  key matches the same ``long`` key after type promotion: ``fmix64(uint64(int64(v)))``, a bijection.
- Floats hash as the IEEE-754 bits of ``float64(v)`` (floats widened exactly, as float -> double
  promotion does) through the same ``fmix64``: ``-0.0`` and ``0.0`` are different keys, every NaN is
  the canonical quiet NaN ``0x7FF8000000000000``.
- Bytes (strings as UTF-8, binary, fixed[L], uuid, decimal128 words) hash with a MurmurHash64A-style
  function of their length and content, finished by ``fmix64``.
- A null is the value hash ``NULL_HASH = fmix64(NULL_SENTINEL)``. ``NULL_SENTINEL`` is a non-canonical
  NaN bit pattern: no float (NaNs are canonicalised) and no integer narrower than 64 bits reaches it,
  so for those columns a null never shares a value's hash; an int64 column holding exactly
  ``NULL_SENTINEL`` would (64 bits cannot name 2**64 values and a null apart).
- ``combine(h, c) = fmix64(h * K + c)``, with ``h = ROW_SEED`` before the first column: order-dependent,
  and a bijection in ``c``, so a single fixed-width key column hashes injectively.
"""

from typing import Any

import numpy as np

from .._jit import Int, scalar

U64 = np.uint64
ROW_SEED = U64(0x243F6A8885A308D3)
NULL_SENTINEL = U64(0x7FF4DE1E7E000001)  # a NaN payload no canonicalised float or narrow int produces
CANONICAL_NAN = U64(0x7FF8000000000000)
_K = U64(0x9E3779B97F4A7C15)  # odd: h * K is a bijection
_F1 = U64(0xFF51AFD7ED558CCD)
_F2 = U64(0xC4CEB9FE1A85EC53)
_M = U64(0xC6A4A7935BD1E995)
_BYTES_SEED = U64(0x5851F42D4C957F2D)
_S33 = U64(33)
_S47 = U64(47)
_S8 = U64(8)


@scalar
def fmix64(k: Any) -> Any:
    """Murmur3's 64-bit finaliser: a bijection on uint64 with full avalanche."""
    k = U64(k)
    k ^= k >> _S33
    k *= _F1
    k ^= k >> _S33
    k *= _F2
    k ^= k >> _S33
    return k


NULL_HASH = U64(0x08935ABDCBBF3068)  # fmix64(NULL_SENTINEL), checked by the tests


@scalar
def combine(h: Any, first: Int, c: Any) -> Any:
    """The row hash after one more column whose value hash is ``c`` (``first``: ``h`` is ignored)."""
    prev = ROW_SEED if first != 0 else U64(h)
    return fmix64(prev * _K + U64(c))


@scalar
def hash_int(v: Any) -> Any:
    """Any signed integer (or uint8 boolean 0/1), by its value widened to int64."""
    return fmix64(U64(np.int64(v)))


@scalar
def hash_float(v: Any) -> Any:
    """A float or double by the bits of ``float64(v)``; NaNs canonical, ``-0.0 != 0.0``."""
    d = np.float64(v)
    if d != d:
        return fmix64(CANONICAL_NAN)
    return fmix64(d.view(np.uint64))


@scalar
def _load_le(data: Any, i: Int, count: Int) -> Any:
    """``count`` (< 8) bytes of ``data`` from ``i`` as a little-endian uint64."""
    k = U64(0)
    for t in range(count):
        k |= U64(data[i + t]) << (U64(t) * _S8)
    return k


@scalar
def _load8(data: Any, i: Int) -> Any:
    """8 bytes of ``data`` from ``i`` as a little-endian uint64 (unrolled: a single load once compiled)."""
    return (
        U64(data[i])
        | (U64(data[i + 1]) << U64(8))
        | (U64(data[i + 2]) << U64(16))
        | (U64(data[i + 3]) << U64(24))
        | (U64(data[i + 4]) << U64(32))
        | (U64(data[i + 5]) << U64(40))
        | (U64(data[i + 6]) << U64(48))
        | (U64(data[i + 7]) << U64(56))
    )


@scalar
def hash_bytes(data: Any, start: Int, end: Int) -> Any:
    """``data[start:end]`` (uint8): MurmurHash64A on 8-byte little-endian words, then ``fmix64``."""
    length = end - start
    h = _BYTES_SEED ^ (U64(length) * _M)
    nblocks = length >> 3
    for b in range(nblocks):
        k = _load8(data, start + 8 * b)
        k *= _M
        k ^= k >> _S47
        k *= _M
        h ^= k
        h *= _M
    rem = length & 7
    if rem != 0:
        h ^= _load_le(data, start + 8 * nblocks, rem)
        h *= _M
    h ^= h >> _S47
    h *= _M
    h ^= h >> _S47
    return fmix64(h)


@scalar
def is_null(validity: Any, nullable: Int, j: Int) -> bool:
    """Bit ``j`` of an LSB-first validity bitmap is clear (never, when ``nullable`` is 0)."""
    return nullable != 0 and ((validity[j >> 3] >> (j & 7)) & 1) == 0
