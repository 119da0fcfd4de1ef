"""Row-level delete masks: position deletes, equality-delete row hashes and sorted-set membership.

Entry points take host NumPy arrays (run on the CPU) or device arrays (run on CUDA); outputs are
allocated on the same side unless passed in, and results stay where they were computed.

Position deletes: ``clear_positions(positions, row_start, keep)`` zeroes ``keep`` at the deleted file
positions of one batch. Equality deletes: hash the key columns of the delete rows and of the data rows
with :func:`hash_rows`; sort (and optionally deduplicate) the delete hashes, then
``member_sorted(delete_hashes, data_hashes)`` flags the candidate rows. Equal keys always hash equal;
distinct keys share a hash with probability about 2**-64 per pair (never, for one fixed-width integer or
float column, except the one int64 value documented in :mod:`.scalar.rowhash`), so callers needing
certainty compare the keys of the flagged rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, prange

from . import elementwise as ew
from ._jit import Int, scalar
from .scalar import rowhash as rh

# --- position deletes -------------------------------------------------------------------------------


@scalar
def _slot(position: Int, row_start: Int, n: Int) -> Int:
    """Index into the batch's keep mask of a file position, or -1 outside ``[row_start, row_start + n)``."""
    k = np.int64(position) - row_start
    if k < 0 or k >= n:
        return -1
    return k


def _clear_cpu(m, keep, positions, row_start, n):  # type: ignore[no-untyped-def]
    for i in prange(m):
        k = _slot(positions[i], row_start, n)
        if k >= 0:
            keep[k] = 0


_slot_device = ew.device_fn(_slot)


def _clear_cuda(m, keep, positions, row_start, n):  # type: ignore[no-untyped-def]
    for i in range(cuda.grid(1), m, cuda.gridsize(1)):
        k = _slot_device(positions[i], row_start, n)
        if k >= 0:
            keep[k] = 0  # racing writers all store 0


CLEAR = ew.ElementwiseKernel.build(
    "clear_positions",
    _clear_cpu,
    _clear_cuda,
    tuple(f"void(int64, {t}[::1], int64[::1], int64, int64)" for t in ("uint8", "boolean")),
)


def _check_same_side(*arrays: Any) -> None:
    sides = {ew.is_device_array(a) for a in arrays}
    if len(sides) > 1:
        raise TypeError("inputs mix host and device arrays: put them all on one side first")


def clear_positions(positions: Any, row_start: int, keep: Any) -> Any:
    """Set ``keep[p - row_start] = 0`` for every file position ``p`` in ``[row_start, row_start + n)``.

    ``keep`` (uint8 or bool, ``n`` rows) covers file positions ``row_start ..``; ``positions`` (int64)
    may be in any order, hold duplicates and values outside the batch (ignored). ``keep`` is updated
    in place and returned.
    """
    _check_same_side(keep, positions)
    CLEAR(positions.shape[0], keep, positions, row_start, keep.shape[0])
    return keep


def positions_in_range(sorted_positions: Any, row_start: int, n: int) -> tuple[int, int]:
    """``(lo, hi)`` such that ``sorted_positions[lo:hi]`` are the positions in ``[row_start, row_start + n)``
    (a host array sorted ascending; binary search on the host)."""
    lo = int(np.searchsorted(sorted_positions, row_start, side="left"))
    hi = int(np.searchsorted(sorted_positions, row_start + n, side="left"))
    return lo, hi


# --- equality-delete row hashes ---------------------------------------------------------------------


@dataclass(frozen=True)
class KeyColumn:
    """One key column in Arrow layout (host or device buffers, not copied).

    - Integers (int8..int64, date32, time64, timestamp64; booleans as uint8 0/1 or bool) and floats
      (float32, float64): ``values`` is the typed values buffer. Integers hash by value (an int32 34
      matches an int64 34), floats by the bits of ``float64(v)``.
    - Strings (UTF-8) and binary: ``values`` is the uint8 data buffer and ``offsets`` the int32 or int64
      offsets buffer (``offset + n + 1`` entries or more, absolute into ``values``).
    - Fixed-width bytes (uuid, fixed[L], and decimals as 16-byte decimal128 little-endian two's
      complement; widen decimal32/64 first): ``values`` is the uint8 buffer, ``width`` the byte width.
    - ``validity``: the LSB-first validity bitmap (uint8), or None when nothing is null.
    - ``offset``: the Arrow array offset of a sliced array, the index of its first row in ``values``
      (elements, or ``width``-byte items), in ``offsets``, and in ``validity`` (bits).
    """

    values: Any
    validity: Any = None
    offset: int = 0
    offsets: Any = None
    width: int = 0

    @staticmethod
    def fixed(values: Any, validity: Any = None, offset: int = 0) -> KeyColumn:
        """An integer, boolean (uint8 0/1) or float column."""
        return KeyColumn(values, validity, offset)

    @staticmethod
    def binary(data: Any, offsets: Any, validity: Any = None, offset: int = 0) -> KeyColumn:
        """A string (UTF-8 bytes) or binary column."""
        return KeyColumn(data, validity, offset, offsets=offsets)

    @staticmethod
    def fixed_bytes(data: Any, width: int, validity: Any = None, offset: int = 0) -> KeyColumn:
        """A uuid, fixed[width] or decimal128 (``width=16``) column."""
        return KeyColumn(data, validity, offset, width=width)


def _row_pass(name: str, step: Callable[..., Any], sigs: tuple[str, ...]) -> ew.ElementwiseKernel:
    """``h[i] = step(h[i], first, values, aux, offset + i, validity, nullable)``: fold one column into
    the row hashes (``first``: the previous ``h`` is the row seed, not read)."""

    def cpu_loop(n, h, first, values, aux, offset, validity, nullable):  # type: ignore[no-untyped-def]
        for i in prange(n):
            h[i] = step(h[i], first, values, aux, offset + i, validity, nullable)

    dstep = ew.device_fn(step)

    def cuda_loop(n, h, first, values, aux, offset, validity, nullable):  # type: ignore[no-untyped-def]
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            h[i] = dstep(h[i], first, values, aux, offset + i, validity, nullable)

    return ew.ElementwiseKernel.build(name, cpu_loop, cuda_loop, sigs)


@scalar
def _int_step(h: Any, first: Int, values: Any, _aux: Int, j: Int, validity: Any, nullable: Int) -> Any:
    c = rh.NULL_HASH if rh.is_null(validity, nullable, j) else rh.hash_int(values[j])
    return rh.combine(h, first, c)


@scalar
def _float_step(h: Any, first: Int, values: Any, _aux: Int, j: Int, validity: Any, nullable: Int) -> Any:
    c = rh.NULL_HASH if rh.is_null(validity, nullable, j) else rh.hash_float(values[j])
    return rh.combine(h, first, c)


@scalar
def _binary_step(h: Any, first: Int, data: Any, offsets: Any, j: Int, validity: Any, nullable: Int) -> Any:
    if rh.is_null(validity, nullable, j):
        c = rh.NULL_HASH
    else:
        c = rh.hash_bytes(data, np.int64(offsets[j]), np.int64(offsets[j + 1]))
    return rh.combine(h, first, c)


@scalar
def _fixed_bytes_step(h: Any, first: Int, data: Any, width: Int, j: Int, validity: Any, nullable: Int) -> Any:
    c = rh.NULL_HASH if rh.is_null(validity, nullable, j) else rh.hash_bytes(data, j * width, (j + 1) * width)
    return rh.combine(h, first, c)


def _pass_sigs(values: str, aux: str) -> str:
    return f"void(int64, uint64[::1], int64, {values}[::1], {aux}, int64, uint8[::1], int64)"


INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "boolean")
HASH_INTS = _row_pass("hash_rows_int", _int_step, tuple(_pass_sigs(t, "int64") for t in INT_TYPES))
HASH_FLOATS = _row_pass(
    "hash_rows_float", _float_step, tuple(_pass_sigs(t, "int64") for t in ("float32", "float64"))
)
HASH_BINARY = _row_pass(
    "hash_rows_binary", _binary_step, tuple(_pass_sigs("uint8", f"{t}[::1]") for t in ("int32", "int64"))
)
HASH_FIXED_BYTES = _row_pass("hash_rows_fixed_bytes", _fixed_bytes_step, (_pass_sigs("uint8", "int64"),))


def _no_validity(like: Any) -> Any:
    """A one-byte stand-in bitmap on ``like``'s side (never read: ``nullable`` is 0)."""
    if ew.is_device_array(like):
        return ew.device_array(1, dtype=np.uint8)
    return np.zeros(1, dtype=np.uint8)


def _check_lengths(column: KeyColumn, n: int) -> None:
    end = column.offset + n
    if column.offsets is not None:
        have, need = column.offsets.shape[0], end + 1
    else:
        have, need = column.values.shape[0], end * max(column.width, 1)
    if column.validity is not None and column.validity.shape[0] * 8 < end:
        have, need = column.validity.shape[0] * 8, end
    if column.offset < 0 or have < need:
        raise ValueError(f"key column too short for offset {column.offset} + {n} rows ({have} < {need})")


def _fold(column: KeyColumn, n: int, h: Any, first: int) -> None:
    values = column.values
    arrays = [a for a in (values, column.offsets, column.validity) if a is not None]
    _check_same_side(h, *arrays)
    _check_lengths(column, n)
    kind = values.dtype.kind
    validity = column.validity if column.validity is not None else _no_validity(h)
    nullable = 1 if column.validity is not None else 0
    tail = (column.offset, validity, nullable)
    if column.offsets is not None:
        HASH_BINARY(n, h, first, values, column.offsets, *tail)
    elif column.width > 0:
        HASH_FIXED_BYTES(n, h, first, values, column.width, *tail)
    elif kind == "f":
        HASH_FLOATS(n, h, first, values, 0, *tail)
    elif kind == "i" or (kind in "ub" and values.dtype.itemsize == 1):
        HASH_INTS(n, h, first, values, 0, *tail)
    else:
        raise TypeError(
            f"no row hash for a {values.dtype} column (wider unsigned ints are not Iceberg types)"
        )


def hash_rows(columns: Sequence[KeyColumn], n: int, out: Any = None) -> Any:
    """uint64 hash per row of the key ``columns`` (in key order; at least one), ``n`` rows each.

    ``out`` (uint64, ``n``) is allocated on the side of the first column's values unless given.
    """
    if not columns:
        raise ValueError("hash_rows needs at least one key column")
    h = out if out is not None else ew.empty(columns[0].values, n, np.uint64)
    for index, column in enumerate(columns):
        _fold(column, n, h, 1 if index == 0 else 0)
    return h


# --- sorted-set membership --------------------------------------------------------------------------


@scalar
def _member(keys: Any, queries: Any, m: Int, i: Int) -> Int:
    """1 if ``queries[i]`` is among ``keys[:m]`` (sorted ascending), else 0. A branch-free binary search
    for the last key <= the query: the same ceil(log2 m) steps for every query (no warp divergence)."""
    if m == 0:
        return 0
    q = queries[i]
    base = np.int64(0)
    size = np.int64(m)
    while size > 1:
        half = size >> 1
        if keys[base + half] <= q:
            base += half
        size -= half
    return 1 if keys[base] == q else 0


@scalar
def _bucket(q: Any, buckets: Any) -> Int:
    """The directory bucket of hash ``q``: its top 32 bits scaled to ``buckets`` (monotonic in ``q``)."""
    return np.int64(((q >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32))


@scalar
def _member_dir(keys: Any, queries: Any, directory: Any, i: Int) -> Int:
    """1 if ``queries[i]`` is among the sorted ``keys``, searching only its directory bucket
    ``keys[directory[b]:directory[b + 1]]`` (about one key per bucket for uniformly spread hashes)."""
    q = queries[i]
    b = _bucket(q, directory.shape[0] - 1)
    lo = directory[b]
    hi = directory[b + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    return 1 if lo < directory[b + 1] and keys[lo] == q else 0


MEMBER = ew.indexed("member_sorted", _member, ("void(int64, uint8[::1], uint64[::1], uint64[::1], int64)",))
MEMBER_DIR = ew.indexed(
    "member_directory", _member_dir, ("void(int64, uint8[::1], uint64[::1], uint64[::1], int64[::1])",)
)
KERNELS = (CLEAR, HASH_INTS, HASH_FLOATS, HASH_BINARY, HASH_FIXED_BYTES, MEMBER, MEMBER_DIR)


def directory_for(sorted_keys: np.ndarray, buckets: int | None = None) -> np.ndarray:
    """Host directory for :func:`member_sorted` over host ``sorted_keys`` (uint64, ascending):
    ``buckets + 1`` int64 start offsets, ``buckets`` defaulting to the next power of two >= the key count
    (at most 2**24), for hash keys spread uniformly over 64 bits."""
    m = sorted_keys.shape[0]
    if buckets is None:
        buckets = 1 << min(24, max(0, int(m - 1).bit_length()))
    if not 1 <= buckets < 2**31:
        raise ValueError(f"directory of {buckets} buckets: need 1 <= buckets < 2**31")
    of_key = ((sorted_keys >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32)
    starts = np.searchsorted(of_key, np.arange(buckets + 1, dtype=np.uint64), side="left")
    return starts.astype(np.int64)


def member_sorted(sorted_keys: Any, queries: Any, out: Any = None, *, directory: Any = None) -> Any:
    """``out[i] = 1`` iff ``queries[i]`` is in ``sorted_keys`` (uint64, ascending, duplicates allowed),
    else 0; ``out`` (uint8) is allocated on the side of ``queries`` unless given. With a ``directory``
    (:func:`directory_for` the same keys, on the same side) each query searches one bucket only."""
    n = queries.shape[0]
    out = out if out is not None else ew.empty(queries, n, np.uint8)
    if directory is None:
        _check_same_side(out, sorted_keys, queries)
        MEMBER(n, out, sorted_keys, queries, sorted_keys.shape[0])
    else:
        _check_same_side(out, sorted_keys, queries, directory)
        MEMBER_DIR(n, out, sorted_keys, queries, directory)
    return out
