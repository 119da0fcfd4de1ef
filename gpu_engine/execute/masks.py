"""Keep-masks from deleted positions, computed by the delete kernels on the scan's backend.

On ``cuda`` the positions in the batch's range go to the device, the kernel clears them there, and the
mask comes back to filter the host batch (the host holds the decoded data when cuDF is not used).

Device work of all scan threads is serialized by :data:`DEVICE_LOCK`: kernels on one device run one
after another on the default stream anyway, and numba's CUDA simulator is not thread-safe (it swaps
module globals while a kernel runs), so tasks overlap their decoding, not their kernels.
"""

from __future__ import annotations

import threading

import numpy as np

from ..kernels import deletes as kd

DEVICE_LOCK = threading.Lock()


def in_range(positions: np.ndarray, first_pos: int, n: int) -> np.ndarray:
    """The sorted ``positions`` that fall in rows [first_pos, first_pos + n)."""
    lo, hi = np.searchsorted(positions, [first_pos, first_pos + n])
    return positions[lo:hi]


def position_keep(positions: np.ndarray, first_pos: int, n: int, backend: str) -> np.ndarray | None:
    """Keep-mask (bool) of ``n`` rows starting at file position ``first_pos``; None when none is deleted."""
    hit = in_range(positions, first_pos, n)
    if not len(hit):
        return None
    return _cleared(hit, first_pos, n, backend)


def rows_keep(rows: np.ndarray, n: int, backend: str) -> np.ndarray:
    """Keep-mask (bool) of ``n`` rows with the rows at indexes ``rows`` cleared: one kernel call."""
    return _cleared(rows, 0, n, backend)


def _cleared(positions: np.ndarray, first_pos: int, n: int, backend: str) -> np.ndarray:
    if backend == "cuda":
        from numba import cuda

        with DEVICE_LOCK:
            keep_d = cuda.to_device(np.ones(n, dtype=np.uint8))
            kd.clear_positions(cuda.to_device(positions), first_pos, keep_d)
            return np.asarray(keep_d.copy_to_host(), dtype=bool)
    keep = np.ones(n, dtype=np.uint8)
    kd.clear_positions(positions, first_pos, keep)
    return keep.view(bool)
