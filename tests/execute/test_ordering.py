"""``sort_indices`` and ``zorder_indices`` against pure-Python references written from the spec.

The sort reference compares Python values row by row (``functools.cmp_to_key``) with the rules of the
spec's "Sorting" section: floats ``-NaN < -Inf < -x < -0.0 < 0.0 < x < Inf < NaN``, strings by UTF-8
bytes, binary by unsigned bytes, decimals by value, nulls first or last per field whatever the direction;
Python's sort is stable, so ties must keep their input order in both. Transforms in the reference are
PyIceberg's per-value functions. The z-order reference builds each row's Morton code as one Python int.
"""

from __future__ import annotations

import functools
import math
import random
import struct
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyiceberg import types as pt
from pyiceberg.transforms import parse_transform as py_transform

from gpu_engine.commit.schema_from_arrow import schema_from_arrow
from gpu_engine.errors import SchemaMismatch, UnsupportedFeature, UnsupportedTransform
from gpu_engine.execute.ordering import interleave, normalized_words, sort_indices, zorder_indices
from gpu_engine.iceberg.schema import Schema
from gpu_engine.iceberg.sorting import SortField, SortOrder

I64 = 1 << 63
DOUBLE_BITS = [
    0x0000000000000000, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,  # ±0.0, ±Inf
    0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFF8000000000123,  # ±NaN, payloads
    0x0000000000000001, 0x8000000000000001, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF,  # denormals, max
    0x3FF8000000000000, 0xBFF8000000000000,  # ±1.5
]  # fmt: skip
FLOAT_BITS = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFC00042,
    0x00000001, 0x80000001, 0x7F7FFFFF, 0xFF7FFFFF, 0x3FC00000, 0xBFC00000,
]  # fmt: skip
STRINGS = [
    "",
    "a",
    "ab",
    "abc",
    "b",
    "B",
    "é",
    "éa",
    "e\u0301",
    "z",
    "\u00ff",
    "\U0001f600",
    "ü",
    "\x00",
    "zz",
]
BINARIES = [b"", b"\x00", b"\x00\x00", b"\x01", b"\x7f", b"\x80", b"\xff", b"\xff\x00", b"a", b"ab"]


def _floats(rng: random.Random, n: int, pool: list[int], dtype: str) -> np.ndarray:
    bits = [rng.choice(pool) if rng.random() < 0.6 else None for _ in range(n)]
    width = np.uint64 if dtype == "f8" else np.uint32
    randoms = np.array([rng.uniform(-100, 100) for _ in range(n)], dtype=dtype)
    out = randoms.view(width).copy()
    for i, b in enumerate(bits):
        if b is not None:
            out[i] = b
    return out.view(dtype)


def column(kind: str, n: int, rng: random.Random, null_rate: float = 0.15) -> pa.Array:
    """``n`` random values of ``kind`` with ties, type extremes and special values; some nulls."""
    mask = np.array([rng.random() < null_rate for _ in range(n)], dtype=bool)
    if kind in ("double", "float"):
        pool, dtype = (DOUBLE_BITS, "f8") if kind == "double" else (FLOAT_BITS, "f4")
        return pa.array(_floats(rng, n, pool, dtype), mask=mask)

    def extreme(extremes: list[int], small: int) -> int:
        return rng.choice(extremes) if rng.random() < 0.2 else rng.randint(-small, small)

    make: dict[str, tuple[pa.DataType, Callable[[], Any]]] = {
        "long": (pa.int64(), lambda: extreme([-I64, I64 - 1, 0, -1], 40)),
        "int": (pa.int32(), lambda: extreme([-(2**31), 2**31 - 1], 9)),
        "string": (pa.string(), lambda: rng.choice(STRINGS)),
        "large_string": (pa.large_string(), lambda: rng.choice(STRINGS)),
        "binary": (pa.binary(), lambda: rng.choice(BINARIES)),
        "decimal": (pa.decimal128(9, 2), lambda: Decimal(rng.randint(-(10**9) + 1, 10**9 - 1)).scaleb(-2)),
        "decimal_small": (pa.decimal128(4, 1), lambda: Decimal(rng.randint(-30, 30)).scaleb(-1)),
        "decimal_wide": (
            pa.decimal128(30, 4),
            lambda: Decimal(extreme([rng.randint(-(10**30) + 1, 10**30 - 1)], 5)).scaleb(-4),
        ),
        "boolean": (pa.bool_(), lambda: rng.random() < 0.5),
        "timestamp": (pa.timestamp("us"), lambda: rng.randint(-(10**14), 10**14)),
        "timestamptz": (pa.timestamp("us", "UTC"), lambda: rng.randint(-(10**12), 10**12)),
        "timestamp_ns": (pa.timestamp("ns"), lambda: rng.randint(-(10**17), 10**17)),
        "date": (pa.date32(), lambda: rng.randint(-800, 800)),
        "time": (pa.time64("us"), lambda: rng.randint(0, 86_400_000_000 - 1)),
        "fixed": (pa.binary(3), lambda: bytes(rng.choice([0, 1, 127, 128, 255]) for _ in range(3))),
        "uuid": (pa.binary(16), lambda: bytes(rng.choice([0, 128, 255]) for _ in range(16))),
    }  # fmt: skip
    arrow_type, value = make[kind]
    values = [None if m else value() for m in mask]
    if kind in ("timestamp", "timestamptz", "timestamp_ns", "date", "time"):
        storage = pa.int32() if kind == "date" else pa.int64()
        return pa.array(values, type=storage).cast(arrow_type)
    if kind == "uuid":
        return pa.ExtensionArray.from_storage(pa.uuid(), pa.array(values, type=arrow_type))
    return pa.array(values, type=arrow_type)


KINDS = [
    "long", "int", "double", "float", "string", "large_string", "binary", "decimal", "decimal_small",
    "decimal_wide", "boolean", "timestamp", "timestamptz", "timestamp_ns", "date", "time", "fixed", "uuid",
]  # fmt: skip
PY_TYPES: dict[str, pt.PrimitiveType] = {
    "long": pt.LongType(), "int": pt.IntegerType(), "string": pt.StringType(), "binary": pt.BinaryType(),
    "decimal": pt.DecimalType(9, 2), "decimal_wide": pt.DecimalType(30, 4), "timestamp": pt.TimestampType(),
    "timestamptz": pt.TimestamptzType(), "timestamp_ns": pt.TimestampNanoType(), "date": pt.DateType(),
    "fixed": pt.FixedType(3), "uuid": pt.UUIDType(),
}  # fmt: skip


# -- the reference ----------------------------------------------------------------------------------


def float_key(x: float) -> tuple[float, ...]:
    if math.isnan(x):
        return (2.0,) if math.copysign(1.0, x) > 0 else (-2.0,)
    return (0.0, x, math.copysign(1.0, x))  # -0.0 before 0.0


def py_values(arr: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values in Iceberg's internal representation (temporal as ints, uuid/fixed as bytes)."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        arr = arr.cast(t.storage_type)
    elif pa.types.is_date32(t):
        arr = arr.cast(pa.int32())
    elif pa.types.is_timestamp(t) or pa.types.is_time64(t):
        arr = arr.cast(pa.int64())
    return list(arr.to_pylist())


def sort_key(v: Any) -> Any:
    if isinstance(v, float):
        return float_key(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    return v  # int, bool, bytes, Decimal


def reference_order(keys: Sequence[list[Any]], directions: Sequence[str], nulls: Sequence[str]) -> list[int]:
    """Stable order of the rows by ``keys`` (comparable Python values or None), per field rules."""

    def cmp(i: int, j: int) -> int:
        for col, direction, null_order in zip(keys, directions, nulls, strict=True):
            a, b = col[i], col[j]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                first = -1 if null_order == "nulls-first" else 1
                return first if a is None else -first
            if a == b:
                continue
            c = -1 if a < b else 1
            return -c if direction == "desc" else c
        return 0

    n = len(keys[0]) if keys else 0
    return sorted(range(n), key=functools.cmp_to_key(cmp))


def transformed_keys(values: list[Any], kind: str, transform: str) -> list[Any]:
    if transform == "identity":
        return [None if v is None else sort_key(v) for v in values]
    fn = py_transform(transform).transform(PY_TYPES[kind])
    if kind == "uuid":
        values = [None if v is None else uuid.UUID(bytes=v) for v in values]
    out = [None if v is None else fn(v) for v in values]
    if kind in ("long", "int") and transform.startswith("truncate"):  # wraps at the type's width, as Java's
        bits = 64 if kind == "long" else 32
        out = [None if v is None else (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1)) for v in out]
    return [None if v is None else sort_key(v) for v in out]


def check(
    table: pa.Table, schema: Schema, fields: list[tuple[str, str, str, str]], kinds: dict[str, str]
) -> None:
    """``sort_indices`` equals the reference for ``fields`` = [(column, transform, direction, nulls)]."""
    order = SortOrder(1, tuple(SortField((schema.ids_by_name[c],), t, d, nl) for c, t, d, nl in fields))
    got = sort_indices(table, schema, order, backend="cpu")
    assert got.dtype == np.int64
    keys = [transformed_keys(py_values(table.column(c)), kinds[c], t) for c, t, _, _ in fields]
    want = reference_order(keys, [d for _, _, d, _ in fields], [nl for _, _, _, nl in fields])
    assert got.tolist() == want, fields


def random_table(kinds: Sequence[str], n: int, seed: int) -> tuple[pa.Table, Schema]:
    rng = random.Random(seed)
    table = pa.table({k: column(k, n, rng) for k in kinds})
    return table, schema_from_arrow(table.schema)


# -- sort ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("direction", ["asc", "desc"])
@pytest.mark.parametrize("nulls", ["nulls-first", "nulls-last"])
def test_single_column_matches_reference(kind: str, direction: str, nulls: str) -> None:
    table, schema = random_table([kind], 300, seed=KINDS.index(kind))
    if nulls == "nulls-last":
        table = table.slice(5)  # a column at a non-zero offset
    check(table, schema, [(kind, "identity", direction, nulls)], {kind: kind})


@pytest.mark.parametrize("seed", range(12))
def test_multi_key_mixed_directions_match_reference(seed: int) -> None:
    rng = random.Random(seed)
    table, schema = random_table(KINDS, 250, seed=100 + seed)
    if seed % 3 == 1:
        table = table.slice(7)  # columns at a non-zero offset
    elif seed % 3 == 2:
        table = pa.concat_tables([table.slice(0, 90), table.slice(90)])  # several chunks
    chosen = rng.sample(KINDS, rng.randint(2, 4))
    fields = [
        (k, "identity", rng.choice(["asc", "desc"]), rng.choice(["nulls-first", "nulls-last"]))
        for k in chosen
    ]
    check(table, schema, fields, {k: k for k in KINDS})


@pytest.mark.parametrize(
    ("kind", "transform"),
    [
        ("long", "bucket[8]"), ("string", "bucket[4]"), ("uuid", "bucket[3]"), ("fixed", "bucket[5]"),
        ("string", "truncate[1]"), ("long", "truncate[10]"), ("decimal", "truncate[50]"),
        ("binary", "truncate[1]"), ("decimal_wide", "truncate[7]"),
        ("timestamp", "day"), ("timestamptz", "hour"), ("date", "month"), ("timestamp", "year"),
        ("timestamp_ns", "day"), ("date", "day"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_transforms_match_reference(kind: str, transform: str, direction: str) -> None:
    table, schema = random_table([kind, "int"], 300, seed=len(transform) + 31 * len(kind))
    fields = [(kind, transform, direction, "nulls-last"), ("int", "identity", "desc", "nulls-first")]
    check(table, schema, fields, {kind: kind, "int": "int"})


@given(st.lists(st.integers(0, 2**64 - 1) | st.sampled_from(DOUBLE_BITS), max_size=60))
def test_double_bit_patterns(bits: list[int]) -> None:
    values = np.array(bits, dtype=np.uint64).view(np.float64)
    table = pa.table({"x": pa.array(values)})
    schema = schema_from_arrow(table.schema)
    for direction in ("asc", "desc"):
        check(table, schema, [("x", "identity", direction, "nulls-first")], {"x": "double"})


def test_float_words_follow_total_order() -> None:
    ordered = [-math.nan, -math.inf, -3e38, -1.0, -1e-45, -0.0, 0.0, 1e-45, 1.0, 3e38, math.inf, math.nan]
    ordered[0] = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    for arrow_type in (pa.float64(), pa.float32()):
        table = pa.table({"x": pa.array(ordered, type=arrow_type)})
        schema = schema_from_arrow(table.schema)
        field = SortField((1,), "identity", "asc", "nulls-first")
        (words,) = normalized_words(table, schema, [field])
        assert (np.diff(words.astype(object)) > 0).all(), arrow_type


def test_ties_keep_input_order_and_void_keeps_all() -> None:
    table = pa.table({"k": [2, 1, 2, 1, None, 2, None], "v": list("abcdefg")})
    schema = schema_from_arrow(table.schema)
    asc = SortOrder(1, (SortField((1,), "identity", "asc", "nulls-last"),))
    assert sort_indices(table, schema, asc).tolist() == [1, 3, 0, 2, 5, 4, 6]
    desc = SortOrder(1, (SortField((1,), "identity", "desc", "nulls-first"),))
    assert sort_indices(table, schema, desc).tolist() == [4, 6, 0, 2, 5, 1, 3]
    void = SortOrder(1, (SortField((2,), "void", "desc", "nulls-first"),))
    assert sort_indices(table, schema, void).tolist() == list(range(7))


def test_empty_table() -> None:
    table, schema = random_table(["long", "string"], 0, seed=0)
    order = SortOrder(
        1,
        (
            SortField((2,), "identity", "desc", "nulls-last"),
            SortField((1,), "bucket[4]", "asc", "nulls-first"),
        ),
    )
    got = sort_indices(table, schema, order)
    assert got.dtype == np.int64 and got.shape == (0,)
    assert zorder_indices(table, schema, ["long", "string"]).shape == (0,)


def test_nested_struct_source() -> None:
    rng = random.Random(5)
    n = 200
    xs = column("long", n, rng)
    ys = column("string", n, rng)
    parents = pa.array([rng.random() < 0.1 for _ in range(n)])
    st_type = pa.struct([("x", pa.int64()), ("y", pa.string())])
    st_arr = pa.StructArray.from_arrays([xs, ys], fields=list(st_type), mask=parents)
    table = pa.table({"id": pa.array(range(n), pa.int64()), "st": st_arr})
    schema = schema_from_arrow(table.schema)
    order = SortOrder(
        1,
        (
            SortField((schema.ids_by_name["st.x"],), "identity", "desc", "nulls-first"),
            SortField((schema.ids_by_name["st.y"],), "identity", "asc", "nulls-last"),
        ),
    )
    rows = st_arr.to_pylist()
    x_keys = [None if r is None else r["x"] for r in rows]
    y_keys = [None if r is None or r["y"] is None else r["y"].encode() for r in rows]
    want = reference_order([x_keys, y_keys], ["desc", "asc"], ["nulls-first", "nulls-last"])
    assert sort_indices(table, schema, order).tolist() == want


def test_errors_name_the_column() -> None:
    table, schema = random_table(["long", "string"], 10, seed=1)
    with pytest.raises(SchemaMismatch, match="id 99"):
        sort_indices(table, schema, SortOrder(1, (SortField((99,), "identity", "asc", "nulls-first"),)))
    with pytest.raises(SchemaMismatch, match="'nope'"):
        zorder_indices(table, schema, ["long", "nope"])
    with pytest.raises(SchemaMismatch, match="'string' is not in the table"):
        sort_indices(
            table.select(["long"]), schema, SortOrder(1, (SortField((2,), "identity", "asc", "nulls-first"),))
        )
    with pytest.raises(UnsupportedTransform, match="several source columns"):
        sort_indices(table, schema, SortOrder(1, (SortField((1, 2), "identity", "asc", "nulls-first"),)))
    with pytest.raises(UnsupportedTransform, match="'zorder_magic'"):
        sort_indices(table, schema, SortOrder(1, (SortField((1,), "zorder_magic", "asc", "nulls-first"),)))
    with pytest.raises(UnsupportedTransform, match="day"):
        sort_indices(table, schema, SortOrder(1, (SortField((2,), "day", "asc", "nulls-first"),)))
    with pytest.raises(UnsupportedFeature, match="one or more columns"):
        zorder_indices(table, schema, [])


# -- z-order ---------------------------------------------------------------------------------------


def zorder_word(values: list[Any], kind: str) -> list[int]:
    """Each value's 64-bit ascending word as a Python int; nulls 0."""
    if kind == "long":
        return [0 if v is None else v + I64 for v in values]
    if kind == "double":
        out = []
        for v in values:
            if v is None:
                out.append(0)
                continue
            (bits,) = struct.unpack("<Q", struct.pack("<d", v))
            if math.isnan(v):
                bits = (bits & I64) | 0x7FF8000000000000
            out.append((~bits & (2**64 - 1)) if bits & I64 else bits | I64)
        return out
    distinct = sorted({sort_key(v) for v in values if v is not None})
    rank = {k: i + 1 for i, k in enumerate(distinct)}  # dense ranks from 1
    return [0 if v is None else rank[sort_key(v)] for v in values]


def morton(words: Sequence[int]) -> int:
    code = 0
    for i in range(63, -1, -1):
        for w in words:
            code = (code << 1) | ((w >> i) & 1)
    return code


@pytest.mark.parametrize("kinds", [["long", "string"], ["double", "long", "decimal_wide"], ["string"]])
@pytest.mark.parametrize("seed", range(3))
def test_zorder_matches_reference(kinds: list[str], seed: int) -> None:
    table, schema = random_table(kinds, 300, seed=seed)
    words = [zorder_word(py_values(table.column(k)), k) for k in kinds]
    codes = [morton([w[r] for w in words]) for r in range(table.num_rows)]
    want = sorted(range(table.num_rows), key=lambda r: codes[r])
    assert zorder_indices(table, schema, kinds).tolist() == want


def test_zorder_grid_is_morton_order() -> None:
    points = [(1, 1), (0, 1), (1, 0), (0, 0)]
    table = pa.table({"x": [p[0] for p in points], "y": [p[1] for p in points]})
    schema = schema_from_arrow(table.schema)
    # the first column's bit is the more significant one at each level (as Iceberg's interleaveBits)
    by_y_x = [points[i] for i in zorder_indices(table, schema, ["y", "x"])]
    assert by_y_x == [(0, 0), (1, 0), (0, 1), (1, 1)]
    by_x_y = [points[i] for i in zorder_indices(table, schema, ["x", "y"])]
    assert by_x_y == [(0, 0), (0, 1), (1, 0), (1, 1)]
    grid = [(x, y) for x in range(4) for y in range(4)]
    random.Random(3).shuffle(grid)
    table = pa.table({"x": [g[0] for g in grid], "y": [g[1] for g in grid]})
    got = [grid[i] for i in zorder_indices(table, schema, ["y", "x"])]
    assert got[:4] == [(0, 0), (1, 0), (0, 1), (1, 1)]  # the first quadrant, then the next
    assert got[4:8] == [(2, 0), (3, 0), (2, 1), (3, 1)]


def test_zorder_after_a_prefix_orders_by_the_prefix_first() -> None:
    grid = [(x, y, p) for x in range(4) for y in range(4) for p in (2, 0, 1)]
    random.Random(4).shuffle(grid)
    table = pa.table({"x": [g[0] for g in grid], "y": [g[1] for g in grid], "p": [g[2] for g in grid]})
    schema = schema_from_arrow(table.schema)
    prefix = (SortField((schema.ids_by_name["p"],), "identity", "asc", "nulls-first"),)
    got = [grid[i] for i in zorder_indices(table, schema, ["y", "x"], prefix=prefix)]
    assert [g[2] for g in got] == sorted(g[2] for g in grid)  # the prefix first
    alone = [grid[i] for i in zorder_indices(table, schema, ["y", "x"])]
    for p in (0, 1, 2):  # then each prefix value's rows in z-order
        assert [g for g in got if g[2] == p] == [g for g in alone if g[2] == p]


def test_interleave_blocks_and_bit_positions() -> None:
    rng = np.random.default_rng(0)
    a, b, c = (rng.integers(0, 2**64, size=70_000, dtype=np.uint64) for _ in range(3))  # > one block
    out = interleave([a, b, c], np)
    for r in (0, 1, 40_000, 69_999):
        code = morton([int(a[r]), int(b[r]), int(c[r])])
        assert [int(w[r]) for w in out] == [
            (code >> 128) & (2**64 - 1),
            (code >> 64) & (2**64 - 1),
            code & (2**64 - 1),
        ]


# -- the CUDA backend ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_matches_cpu() -> None:
    pytest.importorskip("cupy", reason="backend='cuda' orders rows with CuPy")
    table, schema = random_table(KINDS, 500, seed=7)
    rng = random.Random(7)
    for _ in range(5):
        fields = tuple(
            SortField((schema.ids_by_name[k],), "identity", rng.choice(["asc", "desc"]), "nulls-last")
            for k in rng.sample(KINDS, 3)
        )
        order = SortOrder(1, fields)
        assert (
            sort_indices(table, schema, order, backend="cuda") == sort_indices(table, schema, order)
        ).all()
    columns = ["long", "string", "double"]
    assert (
        zorder_indices(table, schema, columns, backend="cuda") == zorder_indices(table, schema, columns)
    ).all()
