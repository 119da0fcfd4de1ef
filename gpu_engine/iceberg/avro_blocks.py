"""The block layout of an Avro object container file, found in one compiled pass.

A container is a header, then blocks of ``count`` (varint), ``size`` (varint), ``size`` bytes of (possibly
compressed) records and the file's 16-byte sync marker. Writers such as PyIceberg's put each record in a
block of its own, so walking the headers in Python costs more than decoding the records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
from numba import njit

F = TypeVar("F", bound=Callable[..., Any])
SYNC_SIZE = 16

# error codes of :func:`_scan`
OK, TRUNCATED_HEADER, BAD_VARINT, NEGATIVE, PAST_END, BAD_SYNC = range(6)
_MESSAGES = {
    TRUNCATED_HEADER: "is cut: the file ends inside its header",
    BAD_VARINT: "has a malformed variable-length number in its header",
    NEGATIVE: "has a negative record count or size",
    PAST_END: "(and its sync marker) runs past the end of the file",
    BAD_SYNC: "is not followed by the file's sync marker",
}


def _jit(fn: F) -> F:
    return cast(F, njit(cache=True, nogil=True)(fn))


@_jit
def _varint(raw: Any, pos: int) -> tuple[int, int, int]:
    """(value, next position, error code) of the zigzag varint at ``pos``."""
    shift = 0
    acc = np.uint64(0)
    n = raw.shape[0]
    while True:
        if pos >= n:
            return 0, pos, TRUNCATED_HEADER
        b = np.uint64(raw[pos])
        pos += 1
        acc |= (b & np.uint64(0x7F)) << np.uint64(shift)
        if (b & np.uint64(0x80)) == 0:
            value: int = np.int64(acc >> np.uint64(1)) ^ -np.int64(acc & np.uint64(1))  # type: ignore[assignment]
            return value, pos, OK
        shift += 7
        if shift > 63:
            return 0, pos, BAD_VARINT


@_jit
def _scan(raw: Any, pos: int, sync: Any, starts: Any, sizes: Any, counts: Any) -> tuple[int, int, int]:
    """Fill starts/sizes/counts (capacity-sized arrays); returns (blocks, error code, failing block)."""
    n = raw.shape[0]
    block = 0
    while pos < n:
        if block >= starts.shape[0]:
            return block, OK, -1  # capacity reached: the caller grows the arrays and scans again
        count, pos, err = _varint(raw, pos)
        if err != OK:
            return block, err, block
        size, pos, err = _varint(raw, pos)
        if err != OK:
            return block, err, block
        if count < 0 or size < 0:
            return block, NEGATIVE, block
        if size > n - pos - SYNC_SIZE:  # not pos + size: a size near 2**63 wraps around
            return block, PAST_END, block
        for k in range(SYNC_SIZE):
            if raw[pos + size + k] != sync[k]:
                return block, BAD_SYNC, block
        starts[block] = pos
        sizes[block] = size
        counts[block] = count
        block += 1
        pos += size + SYNC_SIZE
    return block, OK, -2  # -2: reached the end of the file


def block_layout(
    raw: npt.NDArray[np.uint8], first_block: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(payload starts, payload sizes, record counts) of every block after the header's sync marker at
    ``first_block - 16``; ValueError naming the block and the fault on a damaged file."""
    sync = raw[first_block - SYNC_SIZE : first_block]
    capacity = max(16, raw.shape[0] // 64)
    while True:
        starts = np.empty(capacity, np.int64)
        sizes = np.empty(capacity, np.int64)
        counts = np.empty(capacity, np.int64)
        found, err, where = _scan(raw, first_block, sync, starts, sizes, counts)
        if err != OK:
            raise ValueError(f"block {where} {_MESSAGES[err]}")
        if where == -2:
            return starts[:found], sizes[:found], counts[:found]
        capacity *= 4
