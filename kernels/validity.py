"""Validity bitmaps (Arrow/cuDF LSB-first layout): re-pack a bitmap that starts at a bit offset."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import elementwise as ew
from ._jit import Int, scalar


@scalar
def _gather_byte(bitmap: Any, first_bit: Int, n: Int, byte_index: Int) -> Int:
    """Output byte ``byte_index`` of the bitmap holding bits ``first_bit .. first_bit + n``."""
    out = 0
    for b in range(8):
        i = byte_index * 8 + b
        if i < n:
            j = first_bit + i
            out |= ((bitmap[j >> 3] >> (j & 7)) & 1) << b
    return out


REPACK = ew.indexed("repack_bitmap", _gather_byte, ("void(int64, uint8[::1], uint8[::1], int64, int64)",))
KERNELS = (REPACK,)


def repack(bitmap: Any, bit_offset: int, n: int) -> Any:
    """A bitmap of ``n`` bits starting at bit 0, from ``bitmap`` starting at ``bit_offset``."""
    nbytes = (n + 7) // 8
    if bit_offset % 8 == 0:
        return bitmap[bit_offset // 8 : bit_offset // 8 + nbytes]
    out = ew.empty(bitmap, nbytes, np.uint8)
    REPACK(nbytes, out, bitmap, bit_offset, n)
    return out
