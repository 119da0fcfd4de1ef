"""Hash kernels against mmh3 on the spec's byte encodings (Appendix B), on host and device arrays."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import mmh3
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.kernels import bucket

from .conftest import Place

Host = Callable[[Any], np.ndarray[Any, Any]]
INT64 = st.integers(-(2**63), 2**63 - 1)


def ref_long(v: int) -> int:
    return int(mmh3.hash(struct.pack("<q", v), 0, signed=True))


def ref_decimal(unscaled: int) -> int:
    n = max(1, (unscaled.bit_length() + 8) // 8)
    raw = unscaled.to_bytes(n, "big", signed=True)
    while len(raw) > 1 and ((raw[0] == 0 and raw[1] < 0x80) or (raw[0] == 0xFF and raw[1] >= 0x80)):
        raw = raw[1:]  # minimal two's-complement form, as Java's BigInteger.toByteArray
    return int(mmh3.hash(raw, 0, signed=True))


@given(st.lists(INT64, max_size=64), st.integers(0, 2**31 - 1))
def test_longs_and_buckets(place: Place, host: Host, values: list[int], buckets: int) -> None:
    arr = np.array(values, dtype=np.int64)
    got = host(bucket.hash_longs(place(arr), buckets))
    want = [ref_long(v) for v in values]
    if buckets:
        want = [(h & 0x7FFFFFFF) % buckets for h in want]
    assert got.tolist() == want


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=64))
def test_ints_hash_as_longs(place: Place, host: Host, values: list[int]) -> None:
    got = host(bucket.hash_longs(place(np.array(values, dtype=np.int32))))
    assert got.tolist() == [ref_long(v) for v in values]


@given(st.lists(INT64, max_size=64))
def test_nanos_floor_to_micros(place: Place, host: Host, values: list[int]) -> None:
    got = host(bucket.hash_timestamp_nanos(place(np.array(values, dtype=np.int64))))
    assert got.tolist() == [ref_long(v // 1000) for v in values]


@given(
    st.lists(
        st.integers(-(10**38) + 1, 10**38 - 1) | st.sampled_from([0, -1, -128, 127, 128, -129, 255]),
        max_size=48,
    )
)
def test_decimal_minimum_bytes(place: Place, host: Host, values: list[int]) -> None:
    words = np.array(
        [w for v in values for w in (v & (2**64 - 1), (v >> 64) & (2**64 - 1))], dtype=np.uint64
    ).view(np.int64)
    got = host(bucket.hash_decimal128(place(words)))
    assert got.tolist() == [ref_decimal(v) for v in values]


@given(st.lists(st.binary(max_size=40), max_size=48), st.booleans())
def test_binary_ranges(place: Place, host: Host, values: list[bytes], large: bool) -> None:
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int64 if large else np.int32)
    data = np.frombuffer(b"".join(values) or b"\0", dtype=np.uint8)
    got = host(bucket.hash_binary(place(data), place(offsets)))
    assert got.tolist() == [mmh3.hash(v, 0, signed=True) for v in values]


@given(
    st.integers(1, 24).flatmap(
        lambda w: st.tuples(st.just(w), st.lists(st.binary(min_size=w, max_size=w), max_size=32))
    )
)
def test_fixed_width_bytes(place: Place, host: Host, case: tuple[int, list[bytes]]) -> None:
    width, values = case
    data = np.frombuffer(b"".join(values) or b"\0", dtype=np.uint8)
    got = host(bucket.hash_fixed(place(data), width, len(values)))
    assert got.tolist() == [mmh3.hash(v, 0, signed=True) for v in values]


FLOATS = st.one_of(
    st.tuples(st.just(32), st.lists(st.floats(width=32), max_size=48)),
    st.tuples(st.just(64), st.lists(st.floats(width=64), max_size=48)),
)


@given(FLOATS)
def test_floats_canonical_bits(place: Place, host: Host, case: tuple[int, list[float]]) -> None:
    width, values = case
    arr = np.array(values, dtype=np.float32 if width == 32 else np.float64)

    def ref(v: float) -> int:
        if v != v:
            bits = 0x7FF8000000000000
        elif v == 0.0:
            bits = 0
        else:
            bits = struct.unpack("<q", struct.pack("<d", float(v)))[0]
        return ref_long(bits)

    got = host(bucket.hash_floats(place(arr)))
    assert got.tolist() == [ref(float(v)) for v in arr]


@given(st.lists(st.booleans(), max_size=70), st.integers(0, 9))
def test_booleans_from_bitmap_offsets(place: Place, host: Host, values: list[bool], skip: int) -> None:
    bits = [False] * skip + values
    bitmap = np.packbits(np.array(bits, dtype=bool), bitorder="little") if bits else np.zeros(1, np.uint8)
    got = host(bucket.hash_booleans(place(bitmap), skip, len(values)))
    assert got.tolist() == [ref_long(int(v)) for v in values]


@given(st.integers(1, 2**31 - 1), st.integers(0, 2**31 - 1), st.integers(-2, 2))
def test_reciprocal_modulo_is_exact_near_multiples(n: int, x: int, nudge: int) -> None:
    from gpu_engine.kernels.scalar.murmur3 import mod_positive

    near = min(max((x // n) * n + nudge, 0), 2**31 - 1)  # around a multiple, where estimates slip
    for v in (x, near, 2**31 - 1, n - 1 if n > 1 else 0):
        assert mod_positive(v, n) == v % n
