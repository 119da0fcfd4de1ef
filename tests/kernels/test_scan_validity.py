"""Offsets from lengths (prefix sums across tiles) and validity bitmap re-packing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.kernels import scan, validity

from .conftest import Place

Host = Callable[[Any], np.ndarray[Any, Any]]


@given(st.lists(st.integers(0, 1000), max_size=scan.TILE * scan.TILE + 5), st.booleans())
def test_offsets_from_lengths(place: Place, host: Host, lengths: list[int], large: bool) -> None:
    dtype = np.int64 if large else np.int32
    got = host(scan.offsets_from_lengths(place(np.array(lengths, dtype)), dtype))
    assert got.dtype == dtype
    assert got.tolist() == [0, *np.cumsum(lengths, dtype=np.int64).tolist()]


def test_offsets_span_several_scan_levels(place: Place, host: Host) -> None:
    n = scan.TILE * scan.TILE * 2 + 7  # needs the tile totals to be scanned recursively
    lengths = np.arange(n, dtype=np.int64) % 5
    got = host(scan.offsets_from_lengths(place(lengths), np.int64))
    assert got[-1] == lengths.sum() and (np.diff(got) == lengths).all()


@given(st.lists(st.booleans(), min_size=1, max_size=90), st.integers(0, 20))
def test_repack(place: Place, host: Host, bits: list[bool], skip: int) -> None:
    padded = np.array([True] * skip + bits, dtype=bool)
    bitmap = np.packbits(padded, bitorder="little")
    got = host(validity.repack(place(bitmap), skip, len(bits)))
    assert np.unpackbits(got, bitorder="little")[: len(bits)].astype(bool).tolist() == bits
