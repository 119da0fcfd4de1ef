"""Equality-delete row hashes: Arrow arrays of every key type against a pure-Python reference, on host
and device buffers; equal keys hash equal across layouts and promotions; distinct keys stay distinct."""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.kernels import deletes
from gpu_engine.kernels.deletes import KeyColumn
from gpu_engine.kernels.scalar import rowhash

from .conftest import Place

Host = Callable[[Any], np.ndarray[Any, Any]]
M64 = 2**64 - 1

# --- the reference: the hashing contract of kernels/scalar/rowhash.py in Python integers ------------


def ref_fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    return k ^ (k >> 33)


def ref_bytes(b: bytes) -> int:
    m = 0xC6A4A7935BD1E995
    h = 0x5851F42D4C957F2D ^ ((len(b) * m) & M64)
    whole = len(b) // 8 * 8
    for i in range(0, whole, 8):
        k = (int.from_bytes(b[i : i + 8], "little") * m) & M64
        k = ((k ^ (k >> 47)) * m) & M64
        h = ((h ^ k) * m) & M64
    if len(b) > whole:
        h = ((h ^ int.from_bytes(b[whole:], "little")) * m) & M64
    h = ((h ^ (h >> 47)) * m) & M64
    return ref_fmix(h ^ (h >> 47))


def ref_double(v: float) -> int:
    bits = 0x7FF8000000000000 if v != v else struct.unpack("<Q", struct.pack("<d", v))[0]
    return ref_fmix(bits)


NULL = ref_fmix(int(rowhash.NULL_SENTINEL))


def ref_value(kind: str, v: Any) -> int:
    if v is None:
        return NULL
    if kind == "float":
        return ref_double(v)
    if kind == "int":
        return ref_fmix(int(v) & M64)
    if kind == "decimal":
        return ref_bytes((v & (2**128 - 1)).to_bytes(16, "little"))
    return ref_bytes(v.encode() if isinstance(v, str) else v)


def ref_rows(kinds: list[str], columns: list[list[Any]]) -> list[int]:
    out = []
    for row in zip(*columns, strict=True):
        h = 0x243F6A8885A308D3
        for i, (kind, v) in enumerate(zip(kinds, row, strict=True)):
            prev = 0x243F6A8885A308D3 if i == 0 else h
            h = ref_fmix((prev * 0x9E3779B97F4A7C15 + ref_value(kind, v)) & M64)
        out.append(h)
    return out


# --- Arrow arrays -> KeyColumn, as a caller presents them -------------------------------------------


def key_column(arr: pa.Array, place: Place) -> KeyColumn:
    """The contract: typed values for ints/floats (booleans unpacked to uint8 0/1), data + offsets for
    strings/binary, raw bytes + width for fixed-width binary and decimal128; the array's offset as is."""
    bufs = arr.buffers()
    t = arr.type
    validity = place(np.frombuffer(bufs[0], np.uint8)) if bufs[0] is not None else None

    def raw(buf: Any) -> np.ndarray[Any, Any]:
        return np.frombuffer(buf, np.uint8) if buf is not None and buf.size else np.zeros(1, np.uint8)

    if pa.types.is_boolean(t):
        return KeyColumn.fixed(place(np.unpackbits(raw(bufs[1]), bitorder="little")), validity, arr.offset)
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t):
        offsets = np.frombuffer(bufs[1], np.int64 if pa.types.is_large_string(t) else np.int32)
        return KeyColumn.binary(place(raw(bufs[2])), place(offsets), validity, arr.offset)
    if pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t):
        return KeyColumn.fixed_bytes(place(raw(bufs[1])), t.byte_width, validity, arr.offset)
    dtype = np.dtype(f"<{'f' if pa.types.is_floating(t) else 'i'}{t.bit_width // 8}")
    return KeyColumn.fixed(place(np.frombuffer(bufs[1], dtype)), validity, arr.offset)


def nullable(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | values


# name -> (arrow type, reference kind, value strategy)
INT64 = st.integers(-(2**63), 2**63 - 1)
TYPES: dict[str, tuple[pa.DataType, str, st.SearchStrategy[Any]]] = {
    "int8": (pa.int8(), "int", st.integers(-128, 127)),
    "int16": (pa.int16(), "int", st.integers(-(2**15), 2**15 - 1)),
    "int32": (pa.int32(), "int", st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), "int", INT64 | st.sampled_from([int(rowhash.NULL_SENTINEL) - 1, 0, -1])),
    "date32": (pa.date32(), "int", st.integers(-(2**31), 2**31 - 1)),
    "timestamp": (pa.timestamp("us"), "int", INT64),
    "bool": (pa.bool_(), "int", st.booleans()),
    "float32": (pa.float32(), "float", st.floats(width=32)),
    "float64": (pa.float64(), "float", st.floats() | st.sampled_from([0.0, -0.0, float("nan")])),
    "string": (pa.string(), "bytes", st.text(max_size=20)),
    "large_string": (pa.large_string(), "bytes", st.text(max_size=20)),
    "binary": (pa.binary(), "bytes", st.binary(max_size=20)),
    "uuid": (pa.binary(16), "bytes", st.binary(min_size=16, max_size=16)),
    "fixed3": (pa.binary(3), "bytes", st.binary(min_size=3, max_size=3)),
    "decimal": (pa.decimal128(38, 4), "decimal", st.integers(-(10**38) + 1, 10**38 - 1)),
}
EXACT = decimal.Context(prec=60)  # 38-digit unscaled values stay exact (the default context rounds to 28)
STORAGE = {"date32": pa.int32(), "timestamp": pa.int64()}


def to_arrow(name: str, values: list[Any]) -> pa.Array:
    t = TYPES[name][0]
    if name == "decimal":
        return pa.array([None if v is None else decimal.Decimal(v).scaleb(-4, EXACT) for v in values], t)
    if name in STORAGE:
        return pa.array(values, STORAGE[name]).cast(t)
    return pa.array(values, t)


@st.composite
def tables(draw: st.DrawFn, max_rows: int = 40) -> tuple[list[str], list[list[Any]], int]:
    """Key columns (names, values) plus a number of leading rows to slice off."""
    names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=3))
    n = draw(st.integers(0, max_rows))
    skip = draw(st.integers(0, 11))
    columns = [draw(st.lists(nullable(TYPES[c][2]), min_size=n + skip, max_size=n + skip)) for c in names]
    return names, columns, skip


@given(tables())
def test_hash_rows_match_reference(
    place: Place, host: Host, table: tuple[list[str], list[list[Any]], int]
) -> None:
    names, columns, skip = table
    n = len(columns[0]) - skip
    keys = [key_column(to_arrow(c, v).slice(skip), place) for c, v in zip(names, columns, strict=True)]
    got = host(deletes.hash_rows(keys, n))
    assert got.dtype == np.uint64
    assert got.tolist() == ref_rows([TYPES[c][1] for c in names], [v[skip:] for v in columns])


@given(st.lists(nullable(st.integers(-(2**31), 2**31 - 1)), max_size=40), st.integers(0, 9))
def test_equal_keys_hash_equal_across_layouts(
    place: Place, host: Host, values: list[int | None], skip: int
) -> None:
    """A key hashes the same whatever its physical layout: int32 or int64 (type promotion), sliced or
    not, with or without a validity bitmap, string or large_string, float or double."""
    n = len(values)
    pad: list[int | None] = [7] * skip

    def rows(*arrays: pa.Array) -> list[int]:
        hashes: list[int] = host(deletes.hash_rows([key_column(a, place) for a in arrays], n)).tolist()
        return hashes

    ints = pa.array(pad + values, pa.int32()).slice(skip)
    longs = pa.array(values, pa.int64())
    strs = [None if v is None else f"k{v}é" for v in values]
    s32 = pa.array(strs, pa.string())
    s64 = pa.array([None] * skip + strs, pa.large_string()).slice(skip)
    f32 = pa.array([None if v is None else float(v) / 8 for v in values], pa.float32())
    f64 = f32.cast(pa.float64())
    assert rows(ints, s32, f32) == rows(longs, s64, f64)
    if None not in values:  # no validity bitmap at all vs an all-valid one
        with_bitmap = pa.Array.from_buffers(pa.int64(), n, [pa.py_buffer(b"\xff" * 8), longs.buffers()[1]])
        assert rows(longs) == rows(with_bitmap)


def test_float_keys_nan_and_signed_zero(place: Place, host: Host) -> None:
    bits = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF, 0, 1 << 63]
    doubles = np.array(bits, np.uint64).view(np.float64)
    floats = np.array([np.nan, -np.nan, 0.0, -0.0], np.float32)
    h64 = host(deletes.hash_rows([KeyColumn.fixed(place(doubles))], 6)).tolist()
    h32 = host(deletes.hash_rows([KeyColumn.fixed(place(floats))], 4)).tolist()
    assert len(set(h64[:4])) == 1  # every NaN is one key
    assert len({h64[0], h64[4], h64[5]}) == 3  # NaN, 0.0 and -0.0 are three keys
    assert h32 == [h64[0], h64[0], h64[4], h64[5]]


def test_nulls_hash_to_a_marker_distinct_from_values(place: Place, host: Host) -> None:
    """Null matches null in every column type; values near the sentinel, NaNs and empty strings do not."""
    assert int(rowhash.NULL_HASH) == ref_fmix(int(rowhash.NULL_SENTINEL))
    sentinel = int(rowhash.NULL_SENTINEL)
    tricky: dict[str, list[Any]] = {
        "int64": [sentinel - 1, sentinel + 1, 0],
        "int32": [-1, 0, 2**31 - 1],
        "float64": [float("nan"), struct.unpack("<d", struct.pack("<Q", sentinel))[0], -0.0],
        "string": ["", "\0", "null"],
        "decimal": [0, -1, 1],
        "uuid": [b"\0" * 16, b"\xff" * 16, bytes(range(16))],
    }
    for name, values in tricky.items():
        arr = to_arrow(name, [None, *values, None])
        got = host(deletes.hash_rows([key_column(arr, place)], len(values) + 2)).tolist()
        assert got[0] == got[-1], name
        assert got[0] not in got[1:-1], name


def test_columns_combine_in_order(place: Place, host: Host) -> None:
    a = KeyColumn.fixed(place(np.array([1, 2, 3], np.int64)))
    b = KeyColumn.fixed(place(np.array([4, 5, 6], np.int64)))
    ab = host(deletes.hash_rows([a, b], 3)).tolist()
    ba = host(deletes.hash_rows([b, a], 3)).tolist()
    assert all(x != y for x, y in zip(ab, ba, strict=True))
    assert host(deletes.hash_rows([a], 0)).shape == (0,)


def test_out_buffer_and_validation(place: Place, host: Host) -> None:
    col = KeyColumn.fixed(place(np.arange(10, dtype=np.int32)))
    out = place(np.zeros(4, np.uint64))
    assert deletes.hash_rows([col], 4, out) is out
    assert host(out).tolist() == ref_rows(["int"], [[0, 1, 2, 3]])
    with pytest.raises(ValueError, match="too short"):
        deletes.hash_rows([KeyColumn.fixed(col.values, offset=3)], 8)
    with pytest.raises(ValueError, match="at least one"):
        deletes.hash_rows([], 4)
    with pytest.raises(TypeError, match="uint32"):
        deletes.hash_rows([KeyColumn.fixed(place(np.arange(4, dtype=np.uint32)))], 4)


def test_booleans_as_bool_or_uint8(place: Place, host: Host) -> None:
    flags = np.array([True, False, False, True])
    as_bool = host(deletes.hash_rows([KeyColumn.fixed(place(flags))], 4)).tolist()
    assert as_bool == host(deletes.hash_rows([KeyColumn.fixed(place(flags.astype(np.uint8)))], 4)).tolist()
    assert as_bool == ref_rows(["int"], [[1, 0, 0, 1]])


def test_distinct_keys_give_distinct_hashes() -> None:
    """100k distinct random keys per shape, CPU only: no two share a hash."""
    rng = np.random.default_rng(7)
    n = 100_000
    ints = np.unique(rng.integers(-(2**63), 2**63 - 1, 2 * n, dtype=np.int64))[:n]
    words = [f"{w:x}" for w in rng.integers(0, 2**62, n)] + [""]
    strs = pa.array(sorted(set(words)), pa.string())
    small = rng.integers(0, 1000, 2 * n)  # pairs drawn from 1000 x 1000: each column alone collides
    pairs = np.unique(small.reshape(-1, 2), axis=0)
    uuids = np.frombuffer(rng.bytes(16 * n), np.uint8)
    cases = {
        "int64": [KeyColumn.fixed(ints)],
        "string": [key_column(strs, np.ascontiguousarray)],
        "pair": [KeyColumn.fixed(pairs[:, 0].copy()), KeyColumn.fixed(pairs[:, 1].astype(np.int32))],
        "uuid": [KeyColumn.fixed_bytes(uuids, 16)],
    }
    for name, cols in cases.items():
        rows = len(strs) if name == "string" else len(pairs) if name == "pair" else n
        h = deletes.hash_rows(cols, rows)
        assert len(np.unique(h)) == rows, name
