"""Position-delete masks and sorted-set membership against Python references, on host and device arrays;
an equality-delete pass end to end (hash both sides, sort, probe) against Python tuple sets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.kernels import deletes
from gpu_engine.kernels.deletes import KeyColumn

from .conftest import Place

Host = Callable[[Any], np.ndarray[Any, Any]]
ROW_STARTS = st.sampled_from([0, 1, 5, 1000, 2**32 - 3, 2**33 + 7, 2**62])


@st.composite
def position_cases(draw: st.DrawFn) -> tuple[int, int, list[int], list[int]]:
    """(row_start, n, positions, initial keep): positions around and inside the batch, duplicated,
    unordered, some far away (negative, beyond 2**32, near 2**63)."""
    row_start = draw(ROW_STARTS)
    n = draw(st.integers(0, 300))
    near = st.integers(row_start - 40, row_start + n + 40)
    far = st.sampled_from([-1, -(2**63), 2**63 - 1, 2**32, 2**32 + 1, row_start + n, row_start - 1])
    picked = draw(st.lists(near | far, max_size=200))
    positions = picked + draw(st.lists(st.sampled_from(picked), max_size=20)) if picked else []
    keep = draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n))
    return row_start, n, draw(st.permutations(positions)), keep


def ref_clear(row_start: int, positions: list[int], keep: list[int]) -> list[int]:
    out = list(keep)
    for p in positions:
        if row_start <= p < row_start + len(keep):
            out[p - row_start] = 0
    return out


@given(position_cases(), st.sampled_from([np.uint8, np.bool_]))
def test_clear_positions(
    place: Place, host: Host, case: tuple[int, int, list[int], list[int]], dtype: Any
) -> None:
    row_start, n, positions, keep = case
    guarded = place(np.array([1, *keep, 1], dtype))  # the mask is a view with a guard element each side
    mask = guarded[1 : n + 1]
    returned = deletes.clear_positions(place(np.array(positions, np.int64)), row_start, mask)
    assert returned is mask
    got = host(guarded)
    assert got.dtype == dtype
    assert got.astype(np.int64).tolist() == [1, *ref_clear(row_start, positions, keep), 1]


def test_clear_positions_empty_and_all(place: Place, host: Host) -> None:
    start = 2**35
    keep = place(np.ones(1000, np.uint8))
    deletes.clear_positions(place(np.zeros(0, np.int64)), start, keep)
    assert host(keep).all()
    deletes.clear_positions(
        place(np.arange(start - 500, start + 1500, dtype=np.int64)[::-1].copy()), start, keep
    )
    assert not host(keep).any()
    empty = place(np.ones(0, np.uint8))
    deletes.clear_positions(place(np.array([start], np.int64)), start, empty)
    assert host(empty).shape == (0,)


@pytest.mark.gpu
def test_mixed_sides_are_refused() -> None:
    from numba import cuda

    with pytest.raises(TypeError, match="mix host and device"):
        deletes.clear_positions(np.array([1], np.int64), 0, cuda.to_device(np.ones(4, np.uint8)))
    with pytest.raises(TypeError, match="mix host and device"):
        deletes.member_sorted(np.zeros(1, np.uint64), cuda.to_device(np.zeros(2, np.uint64)))
    with pytest.raises(TypeError, match="mix host and device"):
        deletes.hash_rows([KeyColumn.fixed(np.zeros(2, np.int64), cuda.to_device(np.ones(1, np.uint8)))], 2)


@given(
    st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 60), max_size=80),
    ROW_STARTS,
    st.integers(0, 50),
)
def test_positions_in_range(positions: list[int], row_start: int, n: int) -> None:
    arr = np.sort(np.array(positions, np.int64))
    lo, hi = deletes.positions_in_range(arr, row_start, n)
    assert arr[lo:hi].tolist() == sorted(p for p in positions if row_start <= p < row_start + n)


U64 = st.integers(0, 2**64 - 1)
POOL = st.sampled_from([0, 1, 2, 3, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1])


@given(
    st.lists(U64 | POOL, max_size=100),
    st.lists(U64 | POOL, max_size=100),
    st.data(),
    st.none() | st.integers(1, 70),
)
def test_member_sorted(
    place: Place, host: Host, keys: list[int], others: list[int], data: st.DataObject, buckets: int | None
) -> None:
    keys = keys + data.draw(st.lists(st.sampled_from(keys), max_size=10)) if keys else keys  # duplicates
    queries = data.draw(st.permutations(others + keys[: len(keys) // 2]))
    host_keys = np.sort(np.array(keys, np.uint64))
    sorted_keys = place(host_keys)
    members = set(keys)
    expected = [int(q in members) for q in queries]
    got = host(deletes.member_sorted(sorted_keys, place(np.array(queries, np.uint64))))
    assert got.dtype == np.uint8
    assert got.tolist() == expected
    # the bucket directory (any bucket count, including more buckets than keys) gives the same answer
    directory = deletes.directory_for(host_keys, buckets)
    assert directory[0] == 0 and directory[-1] == len(keys) and (np.diff(directory) >= 0).all()
    via = deletes.member_sorted(sorted_keys, place(np.array(queries, np.uint64)), directory=place(directory))
    assert host(via).tolist() == expected


def test_member_sorted_edges(place: Place, host: Host) -> None:
    queries = place(np.array([0, 5, 2**64 - 1], np.uint64))
    assert host(deletes.member_sorted(place(np.zeros(0, np.uint64)), queries)).tolist() == [0, 0, 0]
    keys = place(np.array([5, 5, 5, 5], np.uint64))
    out = place(np.full(3, 9, np.uint8))
    assert deletes.member_sorted(keys, queries, out) is out
    assert host(out).tolist() == [0, 1, 0]
    assert host(deletes.member_sorted(keys, place(np.zeros(0, np.uint64)))).shape == (0,)


ROW = st.tuples(
    st.none() | st.integers(-3, 3), st.none() | st.sampled_from(["", "a", "é", "ab", "long key ✓"])
)


@given(st.lists(ROW, max_size=60), st.lists(ROW, max_size=20), st.integers(0, 5))
def test_equality_delete_end_to_end(
    place: Place, host: Host, data_rows: list[Any], delete_rows: list[Any], skip: int
) -> None:
    """Data rows (int32 id, string tag; sliced) flagged iff their key is among the delete rows (int64 id,
    large_string tag: promoted types), null matching null: hash equality is key equality here."""

    def columns(rows: list[Any], int_type: pa.DataType, str_type: pa.DataType, pad: int) -> list[KeyColumn]:
        ids = pa.array([7] * pad + [r[0] for r in rows], int_type).slice(pad)
        tags = pa.array([None] * pad + [r[1] for r in rows], str_type).slice(pad)
        return [fixed_column(ids, place), string_column(tags, place)]

    data_h = deletes.hash_rows(columns(data_rows, pa.int32(), pa.string(), skip), len(data_rows))
    delete_h = host(
        deletes.hash_rows(columns(delete_rows, pa.int64(), pa.large_string(), 0), len(delete_rows))
    )
    flagged = host(deletes.member_sorted(place(np.unique(delete_h)), data_h))
    deleted = set(delete_rows)
    assert flagged.tolist() == [int(r in deleted) for r in data_rows]


def validity(arr: pa.Array, place: Place) -> Any:
    return None if arr.buffers()[0] is None else place(np.frombuffer(arr.buffers()[0], np.uint8))


def fixed_column(arr: pa.Array, place: Place) -> KeyColumn:
    values = np.frombuffer(arr.buffers()[1], np.dtype(f"<i{arr.type.bit_width // 8}"))
    return KeyColumn.fixed(place(values), validity(arr, place), arr.offset)


def string_column(arr: pa.Array, place: Place) -> KeyColumn:
    offsets = np.frombuffer(arr.buffers()[1], np.int64 if pa.types.is_large_string(arr.type) else np.int32)
    data = arr.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None and data.size else np.zeros(1, np.uint8)
    return KeyColumn.binary(place(raw), place(offsets), validity(arr, place), arr.offset)
