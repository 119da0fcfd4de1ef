"""truncate kernels against Python big-int and str references, on host and device arrays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.kernels import truncate

from .conftest import Place

Host = Callable[[Any], np.ndarray[Any, Any]]
WIDTHS = st.integers(1, 2**31 - 1) | st.sampled_from([1, 2, 3, 10, 16, 1000])


def wrap(v: int, bits: int) -> int:
    """Two's-complement wrap, as Java's int/long arithmetic does."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=64), WIDTHS)
def test_int32(place: Place, host: Host, values: list[int], width: int) -> None:
    got = host(truncate.truncate_integers(place(np.array(values, np.int32)), width))
    assert got.dtype == np.int32
    assert got.tolist() == [wrap(v - v % width, 32) for v in values]


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=64), WIDTHS)
def test_int64(place: Place, host: Host, values: list[int], width: int) -> None:
    got = host(truncate.truncate_integers(place(np.array(values, np.int64)), width))
    assert got.tolist() == [wrap(v - v % width, 64) for v in values]


def to_words(values: list[int]) -> np.ndarray[Any, Any]:
    words = [w for v in values for w in (v & (2**64 - 1), (v >> 64) & (2**64 - 1))]
    return np.array(words, dtype=np.uint64).view(np.int64)


def from_words(words: np.ndarray[Any, Any]) -> list[int]:
    u = words.view(np.uint64).tolist()
    return [wrap(u[2 * i] | (u[2 * i + 1] << 64), 128) for i in range(len(u) // 2)]


DECIMALS = st.integers(-(10**38) + 1, 10**38 - 1) | st.sampled_from([0, -1, 1, -128, 2**64, -(2**64), 2**63])


@given(st.lists(DECIMALS, max_size=48), WIDTHS)
def test_decimal128(place: Place, host: Host, values: list[int], width: int) -> None:
    got = host(truncate.truncate_decimal128(place(to_words(values)), width))
    assert from_words(got) == [v - v % width for v in values]


def pack(values: list[bytes], large: bool) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int64 if large else np.int32)
    return np.frombuffer(b"".join(values) or b"\0", dtype=np.uint8), offsets


def unpack(data: np.ndarray[Any, Any], offsets: np.ndarray[Any, Any]) -> list[bytes]:
    raw = data.tobytes()
    return [raw[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


@given(st.lists(st.text(max_size=12), max_size=40), st.integers(1, 14), st.booleans())
def test_utf8_code_points(place: Place, host: Host, values: list[str], width: int, large: bool) -> None:
    data, offsets = pack([v.encode() for v in values], large)
    out_data, out_offsets = truncate.truncate_utf8(place(data), place(offsets), width)
    assert host(out_offsets).dtype == offsets.dtype
    got = unpack(host(out_data), host(out_offsets))
    assert [g.decode() for g in got] == [v[:width] for v in values]


@given(st.lists(st.binary(max_size=12), max_size=40), st.integers(1, 14), st.booleans())
def test_binary_bytes(place: Place, host: Host, values: list[bytes], width: int, large: bool) -> None:
    data, offsets = pack(values, large)
    out_data, out_offsets = truncate.truncate_binary(place(data), place(offsets), width)
    assert unpack(host(out_data), host(out_offsets)) == [v[:width] for v in values]
