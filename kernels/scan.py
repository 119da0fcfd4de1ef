"""Prefix sums of lengths into Arrow offsets, on the host (NumPy) or the device (numba.cuda, tiled scan)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import config, cuda, int64

from .elementwise import KERNEL_LAUNCH, device_array, empty, is_device_array, launch_config

TILE = 32 if config.ENABLE_CUDASIM else 256


def _tile_scan_py(n, values, inclusive, tile_totals):  # type: ignore[no-untyped-def]
    """Inclusive scan of each TILE-sized tile in shared memory; the tile's total goes to tile_totals."""
    buf = cuda.shared.array(TILE, int64)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    buf[t] = values[i] if i < n else 0
    cuda.syncthreads()
    step = 1
    while step < TILE:
        add = buf[t - step] if t >= step else 0
        cuda.syncthreads()
        buf[t] += add
        cuda.syncthreads()
        step *= 2
    if i < n:
        inclusive[i] = buf[t]
    if t == TILE - 1:
        tile_totals[cuda.blockIdx.x] = buf[t]


def _add_tile_base_py(n, inclusive, scanned_totals):  # type: ignore[no-untyped-def]
    """Add the exclusive prefix of earlier tiles to every element of tiles 1..k."""
    i = cuda.grid(1)
    tile = i // TILE
    if i < n and tile > 0:
        inclusive[i] += scanned_totals[tile - 1]


def _shift_into_py(n, out, inclusive):  # type: ignore[no-untyped-def]
    """out[i + 1] = inclusive[i], converting to the offsets' dtype."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[i + 1] = inclusive[i]


_tile_scan = cuda.jit(_tile_scan_py)
_shift_into = cuda.jit(_shift_into_py)
_add_tile_base = cuda.jit(_add_tile_base_py)
PTX_KERNELS = (
    (_tile_scan_py, "void(int64, int64[::1], int64[::1], int64[::1])"),
    (_add_tile_base_py, "void(int64, int64[::1], int64[::1])"),
    (_shift_into_py, "void(int64, int32[::1], int64[::1])"),
)


def _device_inclusive_scan(values: Any) -> Any:
    n = values.shape[0]
    tiles = (n + TILE - 1) // TILE
    inclusive = device_array(n, dtype=np.int64)
    totals = device_array(tiles, dtype=np.int64)
    with KERNEL_LAUNCH:
        _tile_scan[tiles, TILE](n, values, inclusive, totals)
    if tiles > 1:
        scanned = _device_inclusive_scan(totals)
        with KERNEL_LAUNCH:
            _add_tile_base[tiles, TILE](n, inclusive, scanned)
    return inclusive


def offsets_from_lengths(lengths: Any, dtype: Any) -> Any:
    """Arrow offsets (``n + 1`` entries starting at 0) of ``dtype`` from per-row lengths."""
    n = lengths.shape[0]
    if not is_device_array(lengths):
        out = np.empty(n + 1, dtype=dtype)
        out[0] = 0
        np.cumsum(lengths, out=out[1:])
        return out
    out = empty(lengths, n + 1, dtype)
    out[0:1].copy_to_device(np.zeros(1, dtype=dtype))
    if n:
        inclusive = _device_inclusive_scan(lengths)
        blocks, threads = launch_config(n)
        with KERNEL_LAUNCH:
            _shift_into[blocks, threads](n, out, inclusive)
    return out
