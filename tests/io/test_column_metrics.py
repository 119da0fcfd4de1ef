"""Column metrics against independent computations: Python's own ordering of the values (with the spec's
-0.0 < 0.0 and NaN rules), hand-computed Appendix D bytes, and properties of the truncated bounds."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import struct
import uuid
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.iceberg import serde
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_schema import to_arrow_schema
from gpu_engine.io.column_metrics import (
    ColumnMetrics,
    MetricsCollector,
    truncate_lower_binary,
    truncate_lower_string,
    truncate_upper_binary,
    truncate_upper_string,
)
from gpu_engine.io.metrics_config import COUNTS, FULL, NONE, MetricsConfig, MetricsMode, truncate

F = it.NestedField
MAX = "\U0010ffff"


def collect(schema: Schema, data: dict[str, Any], config: MetricsConfig | None = None) -> ColumnMetrics:
    collector = MetricsCollector(schema, config or MetricsConfig())
    collector.add(pa.table(data, schema=to_arrow_schema(schema)))
    return collector.result()


def one(t: it.PrimitiveType, values: list[Any], mode: MetricsMode | None = None) -> ColumnMetrics:
    schema = Schema((F(1, "c", t),))
    return collect(schema, {"c": values}, MetricsConfig(mode or truncate(16)))


# -- truncation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "n", "lower", "upper"),
    [
        ("abc", 5, "abc", "abc"),
        ("abc", 3, "abc", "abc"),
        ("abcd", 3, "abc", "abd"),
        ("ab\u00ffz", 3, "ab\u00ff", "ab\u0100"),
        (
            "a" + MAX + MAX + "x",
            3,
            "a" + MAX + MAX,
            "b",
        ),  # U+10FFFF cannot grow: carry to the code point before
        (MAX * 4, 3, MAX * 3, None),  # nothing to increment: no upper bound
        ("a\ud7ffz", 2, "a\ud7ff", "a\ue000"),  # the surrogate range is skipped
        ("\U0001f600\U0001f600\U0001f600", 2, "\U0001f600\U0001f600", "\U0001f600\U0001f601"),
    ],
)
def test_string_truncation(value: str, n: int, lower: str, upper: str | None):
    assert truncate_lower_string(value, n) == lower
    assert truncate_upper_string(value, n) == upper


@pytest.mark.parametrize(
    ("value", "n", "lower", "upper"),
    [
        (b"\x01\x02", 2, b"\x01\x02", b"\x01\x02"),
        (b"\x01\x02\x03", 2, b"\x01\x02", b"\x01\x03"),
        (b"\x01\xff\xff\x00", 3, b"\x01\xff\xff", b"\x02"),
        (b"\xff\xff\xff", 2, b"\xff\xff", None),
        (b"\x00\x00\x00", 1, b"\x00", b"\x01"),
    ],
)
def test_binary_truncation(value: bytes, n: int, lower: bytes, upper: bytes | None):
    assert truncate_lower_binary(value, n) == lower
    assert truncate_upper_binary(value, n) == upper


def utf8(s: str) -> bytes:
    return s.encode("utf-8")  # raises for a lone surrogate: bounds must be valid strings


# code points next to the edges (U+D7FF before the surrogates, U+10FFFF) often, any other one too
EDGES = ["a", "\x7f", "\u07ff", "\ud7ff", "\uffff", "\U0010fffe", MAX]
EDGY = st.one_of(st.sampled_from(EDGES), st.characters(codec="utf-8"))


@given(values=st.lists(st.text(EDGY, max_size=12), min_size=1, max_size=8), n=st.integers(1, 8))
def test_truncated_string_bounds_hold_and_are_tight(values: list[str], n: int):
    lo_value, hi_value = min(values, key=utf8), max(values, key=utf8)
    lower, upper = truncate_lower_string(lo_value, n), truncate_upper_string(hi_value, n)
    assert all(utf8(lower) <= utf8(v) for v in values)
    assert len(lower) == min(n, len(lo_value)) and lo_value.startswith(lower)
    if len(hi_value) <= n:
        assert upper == hi_value
        return
    prefix = hi_value[:n]
    if upper is None:
        assert prefix == MAX * n
        return
    assert all(utf8(upper) >= utf8(v) for v in values)
    assert all(not v.startswith(upper) or v == upper for v in values)  # greater than what it stands for
    k = len(upper) - 1  # as tight as allowed: the longest prefix whose last code point can grow
    assert upper[:k] == prefix[:k] and ord(upper[k]) > ord(prefix[k])
    assert ord(upper[k]) == ord(prefix[k]) + 1 or prefix[k] == "\ud7ff"
    assert set(prefix[k + 1 :]) <= {MAX}


@given(values=st.lists(st.binary(max_size=12), min_size=1, max_size=8), n=st.integers(1, 8))
def test_truncated_binary_bounds_hold_and_are_tight(values: list[bytes], n: int):
    lower, upper = truncate_lower_binary(min(values), n), truncate_upper_binary(max(values), n)
    assert all(lower <= v for v in values) and len(lower) <= n
    hi = max(values)
    if len(hi) <= n:
        assert upper == hi
    elif upper is None:
        assert hi[:n] == b"\xff" * n
    else:
        assert all(upper >= v for v in values)
        k = len(upper) - 1
        assert upper[:k] == hi[:k] and upper[k] == hi[k] + 1 and set(hi[k + 1 : n]) <= {0xFF}


# -- floats: NaN and signed zeros ----------------------------------------------------------------------


def total_order(x: float) -> tuple[float, bool]:
    return (x, math.copysign(1.0, x) > 0)


@pytest.mark.parametrize("t", [it.FLOAT, it.DOUBLE])
@given(
    values=st.lists(
        st.one_of(
            st.none(), st.sampled_from([math.nan, -0.0, 0.0, math.inf, -math.inf]), st.floats(width=32)
        ),
        max_size=12,
    )
)
def test_float_metrics(t: it.PrimitiveType, values: list[float | None]):
    m = one(t, values)
    fmt = "<f" if t == it.FLOAT else "<d"
    finite = [v for v in values if v is not None and not math.isnan(v)]
    assert m.value_counts == {1: len(values)}
    assert m.null_value_counts == {1: sum(v is None for v in values)}
    assert m.nan_value_counts == {1: sum(v is not None and math.isnan(v) for v in values)}
    if not finite:
        assert m.lower_bounds == m.upper_bounds == {}
        return
    assert m.lower_bounds == {1: struct.pack(fmt, min(finite, key=total_order))}
    assert m.upper_bounds == {1: struct.pack(fmt, max(finite, key=total_order))}


# NaN bit patterns: quiet and signaling (quiet bit clear), either sign, with payloads; all are NaN
DOUBLE_NANS = (
    0x7FF8000000000000,
    0xFFF8000000000000,
    0x7FF0000000000001,
    0xFFF0000000000001,
    0x7FF4000000000000,
)
FLOAT_NANS = (0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA00000)


@pytest.mark.parametrize("t", [it.FLOAT, it.DOUBLE])
@given(
    values=st.lists(
        st.one_of(st.floats(width=32, allow_nan=False), st.integers(0, 4)), min_size=1, max_size=8
    )
)
def test_bounds_skip_nans_of_every_bit_pattern(t: it.PrimitiveType, values: list[float | int]) -> None:
    """Integers stand for the NaN patterns: Arrow's min_max skipped quiet NaNs only, and with a signaling
    one reported 3.0 as the minimum of [1.0, sNaN, 3.0]: a filter f = 1.0 then pruned the file."""
    dtype, uint, nans = (
        (np.float32, np.uint32, FLOAT_NANS) if t == it.FLOAT else (np.float64, np.uint64, DOUBLE_NANS)
    )
    raw = np.array([0.0 if isinstance(v, int) else v for v in values], dtype=dtype)
    bits = raw.view(uint)
    for i, v in enumerate(values):
        if isinstance(v, int):
            bits[i] = nans[v]
    schema = Schema((F(1, "c", t),))
    m = collect(schema, {"c": pa.array(raw)}, MetricsConfig(truncate(16)))
    finite = [float(x) for x, v in zip(raw, values, strict=True) if not isinstance(v, int)]
    fmt = "<f" if t == it.FLOAT else "<d"
    assert m.nan_value_counts == {1: len(values) - len(finite)}
    if not finite:
        assert m.lower_bounds == m.upper_bounds == {}
        return
    assert m.lower_bounds == {1: struct.pack(fmt, min(finite, key=total_order))}
    assert m.upper_bounds == {1: struct.pack(fmt, max(finite, key=total_order))}


def test_signed_zero_bounds_by_hand():
    neg, pos = b"\x00\x00\x00\x00\x00\x00\x00\x80", b"\x00" * 8
    for values, lower, upper in [
        ([0.0, -0.0], neg, pos),
        ([-0.0, 0.0, math.nan], neg, pos),
        ([-0.0, -0.0], neg, neg),
        ([0.0], pos, pos),
        ([math.nan, math.nan], None, None),
    ]:
        m = one(it.DOUBLE, values)
        assert (m.lower_bounds.get(1), m.upper_bounds.get(1)) == (lower, upper), values


# -- every primitive type, against Python's ordering and hand-written Appendix D ------------------------

_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
U1, U2 = uuid.UUID("80000000-0000-0000-0000-000000000001"), uuid.UUID("7fffffff-ffff-ffff-ffff-ffffffffffff")

CASES: list[tuple[it.PrimitiveType, list[Any], bytes, bytes]] = [
    (it.BOOLEAN, [True, None, True], b"\x01", b"\x01"),
    (it.BOOLEAN, [True, False], b"\x00", b"\x01"),
    (it.INT, [5, -7, None, 3], struct.pack("<i", -7), struct.pack("<i", 5)),
    (it.LONG, [2**40, -(2**62)], struct.pack("<q", -(2**62)), struct.pack("<q", 2**40)),
    (it.decimal(9, 2), [Decimal("1.50"), Decimal("-0.01"), None], b"\xff", b"\x00\x96"),
    (it.decimal(38, 0), [Decimal(10**37), Decimal(0)], b"\x00", (10**37).to_bytes(16, "big", signed=True)),
    (it.DATE, [dt.date(1969, 12, 31), dt.date(2024, 2, 29)], struct.pack("<i", -1), struct.pack("<i", 19782)),
    (
        it.TIME,
        [dt.time(0, 0, 0, 1), dt.time(23, 59, 59, 999999)],
        struct.pack("<q", 1),
        struct.pack("<q", 86399999999),
    ),
    (
        it.TIMESTAMP,
        [dt.datetime(1969, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 0, 5)],
        struct.pack("<q", -31536000000000),
        struct.pack("<q", 1704067200000005),
    ),
    (
        it.TIMESTAMPTZ,
        [_EPOCH_TZ + dt.timedelta(microseconds=-1), _EPOCH_TZ],
        struct.pack("<q", -1),
        struct.pack("<q", 0),
    ),
    (
        it.TIMESTAMP_NS,
        [pa.scalar(-5, pa.timestamp("ns")), None],
        struct.pack("<q", -5),
        struct.pack("<q", -5),
    ),
    (
        it.TIMESTAMPTZ_NS,
        [pa.scalar(7, pa.timestamp("ns", "UTC"))],
        struct.pack("<q", 7),
        struct.pack("<q", 7),
    ),
    (it.STRING, ["b", "a\u00e9", "a\U0001f600"], b"a\xc3\xa9", b"b"),
    (it.UUID, [U1.bytes, U2.bytes], U2.bytes, U1.bytes),  # unsigned byte order (0x80.. > 0x7f..)
    (it.fixed(2), [b"\x00\xff", b"\x80\x00"], b"\x00\xff", b"\x80\x00"),
    (it.BINARY, [b"\xff", b"\x00\x01", b""], b"", b"\xff"),
]


@pytest.mark.parametrize(("t", "values", "lower", "upper"), CASES, ids=[str(c[0]) for c in CASES])
def test_primitive_bounds_by_hand(t: it.PrimitiveType, values: list[Any], lower: bytes, upper: bytes):
    m = one(t, values, FULL)
    assert m.value_counts == {1: len(values)}
    assert m.null_value_counts == {1: sum(v is None for v in values)}
    assert m.nan_value_counts == {}
    assert (m.lower_bounds, m.upper_bounds) == ({1: lower}, {1: upper})
    assert serde.from_bytes(t, lower) is not None  # and they decode


def test_all_null_and_empty_columns_have_counts_only():
    assert one(it.STRING, [None, None]) == ColumnMetrics({1: 2}, {1: 2}, {}, {}, {})
    assert one(it.DOUBLE, [None]) == ColumnMetrics({1: 1}, {1: 1}, {1: 0}, {}, {})
    assert one(it.INT, []) == ColumnMetrics({1: 0}, {1: 0}, {}, {}, {})


# -- modes -----------------------------------------------------------------------------------------------

MODES_SCHEMA = Schema(
    (
        F(1, "s", it.STRING),
        F(2, "b", it.BINARY),
        F(3, "x", it.fixed(4)),
        F(4, "n", it.LONG),
        F(5, "d", it.DOUBLE),
    )
)
MODES_DATA = {
    "s": ["abcdef", "abzzzz", None],
    "b": [b"\x01\x02\x03", b"\x01\xff\xff", b"\x00"],
    "x": [b"\x00\x01\x02\x03", b"\x09\xff\xff\xff", None],
    "n": [10**12, -3, None],
    "d": [math.nan, 1.0, None],
}


def test_truncate_mode_cuts_strings_and_binary_only():
    m = collect(MODES_SCHEMA, MODES_DATA, MetricsConfig(truncate(2)))
    assert m.lower_bounds == {
        1: b"ab",
        2: b"\x00",
        3: b"\x00\x01",
        4: struct.pack("<q", -3),
        5: struct.pack("<d", 1.0),
    }
    # "abzzzz" -> "ac"; b"\x01\xff\xff" -> b"\x02" (carry); b"\x09\xff.." -> b"\x0a"; numbers keep full bounds
    assert m.upper_bounds == {
        1: b"ac",
        2: b"\x02",
        3: b"\x0a",
        4: struct.pack("<q", 10**12),
        5: struct.pack("<d", 1.0),
    }
    assert m.nan_value_counts == {5: 1}


def test_full_counts_none_per_column():
    config = MetricsConfig(NONE, {1: FULL, 2: COUNTS, 5: COUNTS})
    m = collect(MODES_SCHEMA, MODES_DATA, config)
    assert m.value_counts == {1: 3, 2: 3, 5: 3}
    assert m.null_value_counts == {1: 1, 2: 0, 5: 1}
    assert m.nan_value_counts == {5: 1}
    assert m.lower_bounds == {1: b"abcdef"} and m.upper_bounds == {1: b"abzzzz"}


def test_no_upper_bound_when_no_increment_exists():
    m = one(it.STRING, ["a", MAX * 3], truncate(2))
    assert m.lower_bounds == {1: b"a"} and m.upper_bounds == {}
    m = one(it.BINARY, [b"\xff\xff\xff"], truncate(2))
    assert m.lower_bounds == {1: b"\xff\xff"} and m.upper_bounds == {}


# -- nested fields ---------------------------------------------------------------------------------------

NESTED = Schema(
    (
        F(1, "s", it.StructType((F(2, "a", it.INT), F(3, "t", it.StructType((F(4, "b", it.STRING),)))))),
        F(5, "l", it.ListType(6, it.DOUBLE)),
        F(7, "m", it.MapType(8, it.STRING, 9, it.LONG)),
    )
)
NESTED_DATA = {
    "s": [{"a": 1, "t": {"b": "x"}}, None, {"a": None, "t": None}, {"a": 7, "t": {"b": "q"}}],
    "l": [[1.0, None, math.nan], [], None, [-4.0]],
    "m": [[("k", 1)], None, [], [("a", None), ("z", 5)]],
}


def test_nested_counts_and_bounds():
    m = collect(NESTED, NESTED_DATA)
    # struct fields: one value per row, a null struct makes its fields null
    assert {k: m.value_counts[k] for k in (2, 4)} == {2: 4, 4: 4}
    assert {k: m.null_value_counts[k] for k in (2, 4)} == {2: 2, 4: 2}
    assert (m.lower_bounds[2], m.upper_bounds[2]) == (struct.pack("<i", 1), struct.pack("<i", 7))
    assert (m.lower_bounds[4], m.upper_bounds[4]) == (b"q", b"x")
    # list elements and map entries: one value per element slot, no bounds (as Iceberg Java)
    assert {k: m.value_counts[k] for k in (6, 8, 9)} == {6: 4, 8: 3, 9: 3}
    assert {k: m.null_value_counts[k] for k in (6, 8, 9)} == {6: 1, 8: 0, 9: 1}
    assert m.nan_value_counts == {6: 1}
    assert set(m.lower_bounds) == set(m.upper_bounds) == {2, 4}


def test_sliced_input():
    table = pa.table(NESTED_DATA, schema=to_arrow_schema(NESTED)).slice(1, 2)
    collector = MetricsCollector(NESTED, MetricsConfig())
    collector.add(table)
    m = collector.result()
    assert m.value_counts == {2: 2, 4: 2, 6: 0, 8: 0, 9: 0}
    assert m.null_value_counts == {2: 2, 4: 2, 6: 0, 8: 0, 9: 0}
    assert m.lower_bounds == {} and m.upper_bounds == {}


# -- streaming -------------------------------------------------------------------------------------------


@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.text(st.characters(codec="utf-8"), max_size=20)),
            st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
            st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        ),
        min_size=1,
        max_size=30,
    ),
    cuts=st.lists(st.integers(0, 30), max_size=4),
)
def test_batches_and_merges_equal_one_pass(rows: list[tuple[Any, ...]], cuts: list[int]):
    schema = Schema((F(1, "s", it.STRING), F(2, "d", it.DOUBLE), F(3, "n", it.LONG)))
    table = pa.table(
        {"s": [r[0] for r in rows], "d": [r[1] for r in rows], "n": [r[2] for r in rows]},
        schema=to_arrow_schema(schema),
    )
    config = MetricsConfig(truncate(3))
    whole = MetricsCollector(schema, config)
    whole.add(table)
    bounds = sorted({0, len(rows), *(min(c, len(rows)) for c in cuts)})
    streamed, merged = MetricsCollector(schema, config), MetricsCollector(schema, config)
    for a, b in itertools.pairwise(bounds):
        streamed.add(table.slice(a, b - a).to_batches()[0] if b > a else table.slice(a, 0))
        part = MetricsCollector(schema, config)
        part.add(table.slice(a, b - a))
        merged.merge(part)
    assert streamed.result() == whole.result() == merged.result()
    strings = [r[0] for r in rows if r[0] is not None]
    m = whole.result()
    if strings:
        assert m.lower_bounds[1] == truncate_lower_string(min(strings, key=utf8), 3).encode()
        upper = truncate_upper_string(max(strings, key=utf8), 3)
        assert m.upper_bounds.get(1) == (None if upper is None else upper.encode())
    ints = [r[2] for r in rows if r[2] is not None]
    if ints:
        assert m.lower_bounds[3] == struct.pack("<q", min(ints)) and m.upper_bounds[3] == struct.pack(
            "<q", max(ints)
        )
