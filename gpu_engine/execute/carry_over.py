"""Carry-over removal: rows one snapshot both deleted and inserted unchanged cancel out.

A copy-on-write rewrite (an ``overwrite`` or ``delete`` that rewrote data files) removes whole files and
adds new ones holding most of the same rows; the changelog then lists each untouched row as a DELETE and
an INSERT. As Spark's ``create_changelog_view`` does, equal rows are cancelled in pairs (a multiset
difference: ``k`` equal DELETEs and ``m`` equal INSERTs leave ``|k - m|`` of the more frequent kind).

Rows compare on the given columns by value, exactly: floats by their bits (so ``-0.0`` differs from ``0.0``
and equal NaNs match), nulls equal to nulls, structs field by field. List and map columns cannot be
compared this way: :class:`~gpu_engine.errors.UnsupportedFeature` names the column.

Vectorised: both sides are stacked and sorted on the key columns, so equal rows are adjacent; group
boundaries and each row's rank within its group and side come from numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import UnsupportedFeature


def cancel_carry_overs(
    deleted: pa.Table, inserted: pa.Table, names: Sequence[str]
) -> tuple[pa.Table, pa.Table]:
    """``deleted`` and ``inserted`` without the pairs of rows equal on ``names`` (order kept)."""
    if not deleted.num_rows or not inserted.num_rows or not names:
        return deleted, inserted
    keys: list[pa.Array] = []
    for name in names:
        both = pa.concat_arrays(
            [deleted.column(name).combine_chunks(), inserted.column(name).combine_chunks()]
        )
        keys.extend(_comparable(both, name))
    n_del = deleted.num_rows
    side = np.concatenate([np.zeros(n_del, np.int8), np.ones(inserted.num_rows, np.int8)])
    table = pa.table({f"k{i}": k for i, k in enumerate(keys)} | {"side": side})
    order = pc.sort_indices(table, sort_keys=[(c, "ascending") for c in table.column_names]).to_numpy()
    starts = _group_starts([k.take(pa.array(order)) for k in keys])
    group = np.cumsum(starts) - 1
    sorted_side = side[order]
    # rank of each row among its group's rows of the same side (the (group, side) runs are contiguous)
    run_start = starts | np.concatenate([[True], sorted_side[1:] != sorted_side[:-1]])
    index = np.arange(len(order))
    rank = index - np.maximum.accumulate(np.where(run_start, index, 0))
    dels = np.bincount(group, weights=(sorted_side == 0), minlength=group[-1] + 1)
    ins = np.bincount(group, weights=(sorted_side == 1), minlength=group[-1] + 1)
    cancelled = rank < np.minimum(dels, ins)[group]
    drop = np.zeros(len(order), bool)
    drop[order] = cancelled
    return deleted.filter(pa.array(~drop[:n_del])), inserted.filter(pa.array(~drop[n_del:]))


def _comparable(arr: pa.Array, name: str) -> list[pa.Array]:
    """Sortable arrays standing for ``arr``'s values: equal rows give equal tuples and only they do."""
    t = arr.type
    if pa.types.is_struct(t):
        out = [pc.is_valid(arr)]
        for i in range(t.num_fields):
            out.extend(_comparable(pc.struct_field(arr, [i]), f"{name}.{t.field(i).name}"))
        return out
    if pa.types.is_floating(t):
        width = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width]
        return [arr.view(width)]
    if pa.types.is_dictionary(t):
        return _comparable(arr.dictionary_decode(), name)
    if isinstance(t, pa.BaseExtensionType):
        return _comparable(arr.storage, name)
    if pa.types.is_nested(t):
        raise UnsupportedFeature(
            f"column {name!r} ({t}): list and map values cannot be compared to remove carried-over rows; "
            "leave the column out, or keep carry-overs (remove_carry_overs=False)"
        )
    return [arr]


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
