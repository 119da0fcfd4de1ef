"""Rows of two tables (a snapshot's DELETEs and INSERTs) grouped by equal values of some columns, for
carry-over removal (:mod:`.carry_over`) and update pairing (:mod:`.updates`).

Values compare exactly: floats by their bits (so ``-0.0`` differs from ``0.0`` and equal NaNs match),
nulls equal to nulls, structs field by field, lists element by element and maps entry by entry in their
stored order (a rewrite copies a row's map as it was; the same entries in another order count as another
value, so such a row is listed as a DELETE and an INSERT rather than cancelled).

Vectorised: both sides are stacked and sorted on the columns (then the side), so equal rows are adjacent;
group boundaries, each row's rank within its group and side, and per-group counts come from numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UnsupportedFeature
from ..io.arrow_nested import list_values


@dataclass(frozen=True)
class Matching:
    """The stacked rows (``left`` then ``right``) in sorted order: ``order[i]`` is the stacked index of
    the i-th sorted row, ``group[i]`` its group of equal values, ``right[i]`` its side, ``rank[i]`` its
    rank among its group's rows of the same side; per group, how many rows each side has."""

    order: np.ndarray
    group: np.ndarray
    right: np.ndarray
    rank: np.ndarray
    left_count: np.ndarray
    right_count: np.ndarray
    n_left: int


def match_rows(left: pa.Table, right: pa.Table, names: Sequence[str]) -> Matching:
    """Group the rows of ``left`` and ``right`` (both non-empty) by their values of ``names``."""
    keys: list[pa.Array] = []
    for name in names:
        both = pa.concat_arrays([left.column(name).combine_chunks(), right.column(name).combine_chunks()])
        keys.extend(comparable(both, name))
    side = np.concatenate([np.zeros(left.num_rows, np.int8), np.ones(right.num_rows, np.int8)])
    table = pa.table({f"k{i}": k for i, k in enumerate(keys)} | {"side": side})
    order = pc.sort_indices(table, sort_keys=[(c, "ascending") for c in table.column_names]).to_numpy()
    starts = _group_starts([k.take(pa.array(order)) for k in keys])
    group = np.cumsum(starts) - 1
    sorted_side = side[order]
    # the (group, side) runs are contiguous: a row's rank is its distance from its run's start
    run_start = starts | np.concatenate([[True], sorted_side[1:] != sorted_side[:-1]])
    index = np.arange(len(order))
    rank = index - np.maximum.accumulate(np.where(run_start, index, 0))
    groups = int(group[-1]) + 1
    return Matching(
        order=order,
        group=group,
        right=sorted_side == 1,
        rank=rank,
        left_count=np.bincount(group, weights=(sorted_side == 0), minlength=groups).astype(np.int64),
        right_count=np.bincount(group, weights=(sorted_side == 1), minlength=groups).astype(np.int64),
        n_left=left.num_rows,
    )


def comparable(arr: pa.Array, name: str) -> list[pa.Array]:
    """Sortable arrays standing for ``arr``'s values: equal rows give equal tuples and only they do."""
    t = arr.type
    if pa.types.is_null(t):  # a v3 ``unknown`` column: every value null, so every row equal
        return [pc.is_valid(arr)]
    if pa.types.is_struct(t):
        out = [pc.is_valid(arr)]
        for i in range(t.num_fields):
            out.extend(comparable(pc.struct_field(arr, [i]), f"{name}.{t.field(i).name}"))
        return out
    if pa.types.is_floating(t):
        width = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width]
        return [arr.view(width)]
    if pa.types.is_dictionary(t):
        return comparable(arr.dictionary_decode(), name)
    if isinstance(t, pa.BaseExtensionType):
        return comparable(arr.storage, name)
    if pa.types.is_map(t):
        return comparable(arr.cast(pa.list_(pa.struct([t.key_field, t.item_field]))), name)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [pc.is_valid(arr), _element_ids(arr, f"{name}.element")]
    if pa.types.is_nested(t):
        raise UnsupportedFeature(f"column {name!r} ({t}): values of this type cannot be compared")
    return [arr]


def _element_ids(arr: pa.Array, name: str) -> pa.Array:
    """Each list as a string of its elements' group numbers (8 bytes each), groups of equal elements
    numbered as :func:`match_rows` groups rows: equal lists give equal strings, and only they do."""
    values = list_values(arr)  # the elements of the valid lists, in order
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ids = np.zeros(len(values), "<i8")
    if len(values):
        keys = comparable(values, name)
        order = pc.sort_indices(
            pa.table({f"k{i}": k for i, k in enumerate(keys)}),
            sort_keys=[(f"k{i}", "ascending") for i in range(len(keys))],
        ).to_numpy()
        ids[order] = np.cumsum(_group_starts([k.take(pa.array(order)) for k in keys])) - 1
    offsets = np.concatenate([[0], np.cumsum(lengths) * 8]).astype(np.int64)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(ids.tobytes())]
    return pa.Array.from_buffers(pa.large_binary(), len(arr), buffers)


def _group_starts(sorted_keys: list[pa.Array]) -> np.ndarray:
    """Where a new group of equal key tuples starts in the sorted rows (nulls equal to nulls)."""
    n = len(sorted_keys[0])
    starts = np.zeros(n, bool)
    starts[0] = True
    for k in sorted_keys:
        a, b = k.slice(1), k.slice(0, n - 1)
        differ = pc.fill_null(pc.not_equal(a, b), False)
        null_differs = pc.not_equal(pc.is_null(a), pc.is_null(b))
        starts[1:] |= pc.or_(differ, null_differs).to_numpy(zero_copy_only=False)
    return starts
