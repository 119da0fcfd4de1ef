"""Randomized oracle tests of ``gpu_engine.transforms`` against PyIceberg, mmh3 and NumPy.

Every valid transform x source type pair of the spec's "Partition Transforms" table runs on random
Arrow data (nulls, slices at offsets that are not multiples of 8, multi-chunk ChunkedArrays, type
extremes, pre-1970 values, sub-microsecond nanoseconds, 38-digit decimals, multi-byte UTF-8) and is
compared value by value with PyIceberg's per-value functions (``t.transform(type)(value)``).
``hash32`` is compared with mmh3 over the bytes Appendix B prescribes, including boolean, float and
double, which PyIceberg does not bucket. Temporal values outside Python's datetime range (years
1..9999, where PyIceberg cannot compute) are checked against Python integer division plus NumPy's
proleptic Gregorian calendar. Each test runs once per ``backend`` (cpu, and cuda where usable).
"""

from __future__ import annotations

import itertools
import math
import os
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg import transforms as pt
from pyiceberg import types as it

from gpu_engine import transforms as gt
from gpu_engine.errors import UnsupportedTransform

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
# values per generated array, before slice padding (<= 21 + 5 per piece) is added around them
# (the simulator launches 32 threads: more than 32 values exercise the grid-stride loop)
MAX_VALUES = 48 if SIMULATED else 64

# the loaded profile (60 examples, or 8 under the simulator) plus: `backend` is a function-scoped
# fixture, but it is a constant string, so reusing it across examples is safe
ORACLE = settings(
    suppress_health_check=[
        *settings().suppress_health_check,
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ]
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
EPOCH_DATE = date(1970, 1, 1)
EPOCH = datetime(1970, 1, 1)
MICROS_PER_HOUR = 3_600_000_000
MICROS_PER_DAY = 86_400_000_000


def _days(d: date) -> int:
    return (d - EPOCH_DATE).days


def _micros(dt: datetime) -> int:
    return (dt - EPOCH) // timedelta(microseconds=1)


# PyIceberg's temporal functions go through Python's datetime: years 1..9999 only
MIN_DAYS, MAX_DAYS = _days(date(1, 1, 1)), _days(date(9999, 12, 31))
MIN_MICROS, MAX_MICROS = _micros(datetime(1, 1, 1)), _micros(datetime(9999, 12, 31, 23, 59, 59, 999_999))
TS_2017 = _micros(datetime(2017, 11, 16, 22, 31, 8))


def _same(v: Any) -> Any:
    return v


def _decimal(unscaled: int, scale: int) -> Decimal:
    """The Decimal with this unscaled value and exponent ``-scale`` (exact, no context rounding)."""
    sign, digits, _ = Decimal(unscaled).as_tuple()
    return Decimal((sign, digits, -scale))


def _wrap(v: int, bits: int) -> int:
    """Two's-complement wrap to ``bits`` (Java's int/long overflow)."""
    half = 1 << (bits - 1)
    return (v + half) % (1 << bits) - half


# -- source kinds: how each Iceberg type is generated, put into Arrow and handed to the oracles ------


@dataclass(frozen=True)
class Kind:
    """One concrete Iceberg source type. Raw values are what the strategies draw: ints for int/long,
    days, micros, nanos and decimal unscaled values; IEEE bit patterns for float/double; str; bytes."""

    source: str  # Iceberg type string as passed to gpu_engine ("decimal(38,10)", "fixed[4]")
    iceberg: it.PrimitiveType  # PyIceberg's type for the oracle
    arrow_types: tuple[pa.DataType, ...]  # accepted Arrow input types, drawn at random
    raw: st.SearchStrategy[Any]  # broad random raw values
    samples: tuple[Any, ...]  # edge values, mixed into ``raw`` and used by the deterministic tests
    to_arrow_py: Callable[[Any], Any] = _same  # raw -> a value ``pa.array`` accepts
    to_oracle: Callable[[Any], Any] = _same  # raw -> the value PyIceberg's per-value function expects
    bits: pa.DataType | None = None  # float/double: raw values are bit patterns of this unsigned type
    strategy: st.SearchStrategy[Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        edges = st.sampled_from(self.samples) if self.samples else st.nothing()
        object.__setattr__(self, "strategy", st.one_of(edges, self.raw))

    def build(self, raws: Sequence[Any], arrow_type: pa.DataType) -> pa.Array:
        if self.bits is not None:
            return pa.array(list(raws), type=self.bits).view(arrow_type)
        return pa.array([None if r is None else self.to_arrow_py(r) for r in raws], type=arrow_type)


def _int_kind(source: str, bits: int) -> Kind:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    samples = (0, 1, -1, 2, -2, 9, -9, 10, -10, 34, 127, -128, lo, lo + 1, hi, hi - 1, INT32_MIN, INT32_MAX)
    return Kind(
        source,
        it.IntegerType() if bits == 32 else it.LongType(),
        (pa.int32() if bits == 32 else pa.int64(),),
        st.one_of(st.integers(lo, hi), st.integers(-1000, 1000)),
        tuple(v for v in samples if lo <= v <= hi),
    )


def _decimal_kind(precision: int, scale: int) -> Kind:
    bound = 10**precision - 1
    edges = (0, 1, -1, 127, -128, 128, -129, 255, 256, -256, 32767, -32768, 1420, 2**31, -(2**31))
    wide = (2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64 - 1, 2**64, -(2**64), 2**100, -(2**100) + 1)
    samples = tuple(v for v in (*edges, *wide, bound, -bound, bound - 1, -bound + 1) if abs(v) <= bound)
    return Kind(
        f"decimal({precision},{scale})",
        it.DecimalType(precision, scale),
        (pa.decimal128(precision, scale),),
        st.one_of(st.integers(-bound, bound), st.integers(-min(bound, 1000), min(bound, 1000))),
        samples,
        to_arrow_py=lambda u: _decimal(u, scale),
        to_oracle=lambda u: _decimal(u, scale),
    )


def _fixed_kind(length: int) -> Kind:
    samples = (
        bytes(length),
        b"\xff" * length,
        bytes(range(length)),
        bytes(0x80 + i % 0x80 for i in range(length)),
    )
    return Kind(
        f"fixed[{length}]",
        it.FixedType(length),
        (pa.binary(length),),
        st.binary(min_size=length, max_size=length),
        samples,
    )


def _float_bits(value: float, width: int) -> int:
    fmt = ("<f", "<I") if width == 32 else ("<d", "<Q")
    return int(struct.unpack(fmt[1], struct.pack(fmt[0], value))[0])


def _float_kind(width: int) -> Kind:
    edges: tuple[int, ...]
    iceberg: it.PrimitiveType
    if width == 32:
        edges = (
            0x0000_0000,
            0x8000_0000,
            0x3F80_0000,
            0xBF80_0000,
            0x7F80_0000,
            0xFF80_0000,
            0x7FC0_0000,
            0x7F80_0001,
            0xFFC0_0001,
            0x7FFF_FFFF,
            0x0000_0001,
            0x807F_FFFF,
            0x7F7F_FFFF,
        )
        unsigned, floats = pa.uint32(), st.floats(width=32, allow_nan=True)
        iceberg, arrow_type = it.FloatType(), pa.float32()
    else:
        edges = (
            0,
            1 << 63,
            0x3FF0_0000_0000_0000,
            0x7FF0_0000_0000_0000,
            0xFFF0_0000_0000_0000,
            0x7FF8_0000_0000_0000,
            0x7FF0_0000_0000_0001,
            0xFFF8_0000_0000_0001,
            0x7FFF_FFFF_FFFF_FFFF,
            1,
            0x800F_FFFF_FFFF_FFFF,
            0x7FEF_FFFF_FFFF_FFFF,
        )
        unsigned, floats = pa.uint64(), st.floats(allow_nan=True)
        iceberg, arrow_type = it.DoubleType(), pa.float64()
    raw = st.one_of(st.integers(0, (1 << width) - 1), floats.map(lambda f: _float_bits(f, width)))
    return Kind("float" if width == 32 else "double", iceberg, (arrow_type,), raw, edges, bits=unsigned)


_MICROS_EDGES = (
    0,
    1,
    -1,
    MIN_MICROS,
    MAX_MICROS,
    MICROS_PER_DAY,
    -MICROS_PER_DAY,
    -MICROS_PER_DAY - 1,
    MICROS_PER_HOUR,
    -MICROS_PER_HOUR,
    -MICROS_PER_HOUR - 1,
    MICROS_PER_HOUR - 1,
    TS_2017,
    TS_2017 + 1,
    _micros(datetime(1900, 1, 1)),
    _micros(datetime(1900, 2, 28, 23, 59, 59, 999_999)),
    _micros(datetime(1600, 2, 29, 12)),
    _micros(datetime(1582, 10, 4)),
    _micros(datetime(1969, 1, 1)),
    _micros(datetime(1968, 12, 31, 23, 59, 59, 999_999)),
    _micros(datetime(2000, 2, 29, 23)),
)
_NANOS_EDGES = (
    0,
    1,
    -1,
    999,
    -999,
    1000,
    -1000,
    1001,
    -1001,
    INT64_MIN,
    INT64_MIN + 1,
    INT64_MAX,
    INT64_MAX - 1,
    -MICROS_PER_DAY * 1000,
    -MICROS_PER_DAY * 1000 - 1,
    -MICROS_PER_HOUR * 1000 - 1,
    TS_2017 * 1000 + 1001,
    _micros(datetime(1969, 1, 1)) * 1000 - 1,
    _micros(datetime(1900, 3, 1)) * 1000 + 999,
)
_DATE_EDGES = (
    0,
    1,
    -1,
    MIN_DAYS,
    MAX_DAYS,
    _days(date(2017, 11, 16)),
    _days(date(1969, 12, 31)),
    _days(date(1969, 1, 1)),
    _days(date(1968, 12, 31)),
    _days(date(1900, 2, 28)),
    _days(date(1900, 3, 1)),
    _days(date(2000, 2, 29)),
    _days(date(1600, 2, 29)),
    _days(date(1582, 10, 4)),
    _days(date(1, 12, 31)),
)
_STRING_EDGES = (
    "",
    "a",
    "iceberg",
    "\x00",
    "ab\x00c",
    "\u00e9",
    "\u00df\u00e9",
    "\u4e2d\u6587",
    "\U0001f600",
    "a\U0001f600b",
    "\U0010ffff",
    "\u20ac\U0001d11e\u00e9x",
    "\U0001f600" * 5,
    "e\u0301",
    "\x7f\u0080\u07ff\u0800\uffff",
)
_UTF8_MIX = st.text(
    alphabet=st.sampled_from(
        ["a", "Z", "\x00", "\u00e9", "\u00df", "\u20ac", "\u4e2d", "\U0001f600", "\U0001d11e"]
    ),
    max_size=16,
)
_BINARY_EDGES = (b"", b"\x00", b"\x80", b"\xff", b"\xff" * 5, b"\x00\x01\x02\x03", bytes(range(0x70, 0x98)))
_UUID_EDGES = (
    uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes,
    bytes(16),
    b"\xff" * 16,
    bytes(range(0x80, 0x90)),
)


def _simple_kinds() -> dict[str, Kind]:
    micros = st.integers(MIN_MICROS, MAX_MICROS)
    nanos = st.integers(INT64_MIN, INT64_MAX)
    kinds = [
        Kind("unknown", it.UnknownType(), (pa.null(),), st.nothing(), ()),
        Kind("boolean", it.BooleanType(), (pa.bool_(),), st.booleans(), (True, False)),
        _int_kind("int", 32),
        _int_kind("long", 64),
        _float_kind(32),
        _float_kind(64),
        Kind("date", it.DateType(), (pa.date32(),), st.integers(MIN_DAYS, MAX_DAYS), _DATE_EDGES),
        Kind(
            "time",
            it.TimeType(),
            (pa.time64("us"),),
            st.integers(0, MICROS_PER_DAY - 1),
            (0, 1, MICROS_PER_DAY - 1, 81_068_000_000, 43_200_000_000),
        ),
        Kind("timestamp", it.TimestampType(), (pa.timestamp("us"),), micros, _MICROS_EDGES),
        Kind("timestamptz", it.TimestamptzType(), (pa.timestamp("us", tz="UTC"),), micros, _MICROS_EDGES),
        Kind("timestamp_ns", it.TimestampNanoType(), (pa.timestamp("ns"),), nanos, _NANOS_EDGES),
        Kind(
            "timestamptz_ns", it.TimestamptzNanoType(), (pa.timestamp("ns", tz="UTC"),), nanos, _NANOS_EDGES
        ),
        Kind(
            "string",
            it.StringType(),
            (pa.string(), pa.large_string()),
            st.one_of(st.text(max_size=20), _UTF8_MIX),
            _STRING_EDGES,
        ),
        Kind(
            "binary", it.BinaryType(), (pa.binary(), pa.large_binary()), st.binary(max_size=40), _BINARY_EDGES
        ),
        Kind(
            "uuid",
            it.UUIDType(),
            (pa.binary(16),),
            st.uuids().map(lambda u: u.bytes),
            _UUID_EDGES,
            to_oracle=lambda b: uuid.UUID(bytes=b),
        ),
    ]
    return {k.source: k for k in kinds}


SIMPLE = _simple_kinds()
FAMILIES = (*SIMPLE, "decimal", "fixed")
HASHABLE = (
    "int",
    "long",
    "decimal",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "timestamp_ns",
    "timestamptz_ns",
    "string",
    "uuid",
    "fixed",
    "binary",
)
TEMPORAL_SOURCES = ("date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns")
FIXED_LENGTHS = (1, 2, 3, 4, 5, 7, 8, 16, 33)


def kind_of(source: str) -> Kind:
    """The Kind of a concrete type string: a simple name, ``decimal(P,S)`` or ``fixed[L]``."""
    if source in SIMPLE:
        return SIMPLE[source]
    if source.startswith("decimal("):
        p, s = source[len("decimal(") : -1].split(",")
        return _decimal_kind(int(p), int(s))
    if source.startswith("fixed["):
        return _fixed_kind(int(source[len("fixed[") : -1]))
    raise KeyError(source)


@st.composite
def kinds(draw: st.DrawFn, family: str) -> Kind:
    """A concrete Kind of ``family``: decimals draw precision (to 38) and scale, fixed draws its length."""
    if family == "decimal":
        precision = draw(st.one_of(st.sampled_from([1, 2, 9, 10, 18, 19, 38, 38]), st.integers(1, 38)))
        scale = draw(st.one_of(st.sampled_from([0, precision]), st.integers(0, precision)))
        return _decimal_kind(precision, scale)
    if family == "fixed":
        return _fixed_kind(draw(st.sampled_from(FIXED_LENGTHS)))
    return SIMPLE[family]


# -- Arrow inputs: plain, sliced at odd offsets, chunked -----------------------------------------------


@st.composite
def _piece(
    draw: st.DrawFn,
    kind: Kind,
    raws: list[Any],
    arrow_type: pa.DataType,
    sliced: bool,
    element: st.SearchStrategy[Any],
) -> pa.Array:
    """``raws`` as an Arrow array; when ``sliced``, a slice at an offset that is not a multiple of 8."""
    if not sliced:
        return kind.build(raws, arrow_type)
    k = draw(st.integers(1, 21).filter(lambda k: k % 8 != 0))
    head = draw(st.lists(element, min_size=k, max_size=k))
    tail = draw(st.lists(element, max_size=5))
    full = kind.build([*head, *raws, *tail], arrow_type)
    return full.slice(k) if not tail else full.slice(k, len(raws))


@st.composite
def arrow_inputs(
    draw: st.DrawFn, kind: Kind, keep: Callable[[Any], bool] | None = None
) -> tuple[list[Any], pa.Array | pa.ChunkedArray]:
    """(raw values with None for nulls, the same values as a pyarrow Array or ChunkedArray).

    ``keep`` filters the non-null values (and the padding around slices)."""
    values = kind.strategy if keep is None else kind.strategy.filter(keep)
    element = st.one_of(st.none(), values)
    size = draw(st.one_of(st.integers(0, 8), st.integers(0, MAX_VALUES)))
    raws = draw(st.lists(element, min_size=size, max_size=size))
    arrow_type = draw(st.sampled_from(kind.arrow_types))
    shape = draw(st.sampled_from(["plain", "sliced", "chunked"]))
    if shape != "chunked":
        return raws, draw(_piece(kind, raws, arrow_type, shape == "sliced", element))
    cuts = sorted(draw(st.lists(st.integers(0, len(raws)), min_size=1, max_size=4)))
    bounds = [0, *cuts, len(raws)]
    chunks = [
        draw(_piece(kind, raws[a:b], arrow_type, draw(st.booleans()), element))
        for a, b in itertools.pairwise(bounds)
    ]
    return raws, pa.chunked_array(chunks, type=arrow_type)


BUCKETS = st.one_of(st.sampled_from([1, 2, 16, 1000, INT32_MAX]), st.integers(1, INT32_MAX))
WIDTHS = st.one_of(st.sampled_from([1, 2, 3, 10, 16, 1000]), st.integers(1, 64), st.integers(1, INT32_MAX))


# -- oracles and comparison -------------------------------------------------------------------------------


def pyiceberg_transform(text: str) -> pt.Transform[Any, Any]:
    if text.startswith("bucket["):
        return pt.BucketTransform(int(text[len("bucket[") : -1]))
    if text.startswith("truncate["):
        return pt.TruncateTransform(int(text[len("truncate[") : -1]))
    simple: dict[str, pt.Transform[Any, Any]] = {
        "identity": pt.IdentityTransform(),
        "void": pt.VoidTransform(),
        "year": pt.YearTransform(),
        "month": pt.MonthTransform(),
        "day": pt.DayTransform(),
        "hour": pt.HourTransform(),
    }
    return simple[text]


def pyiceberg_expected(transform: str, kind: Kind, raws: Sequence[Any]) -> list[Any]:
    """PyIceberg's per-value result for every raw value (None stays None)."""
    fn = pyiceberg_transform(transform).transform(kind.iceberg)
    # identity and void pass values through (or drop them): feed them the stored (Arrow-level) form
    to_input = kind.to_arrow_py if transform in ("identity", "void") else kind.to_oracle
    out = [None if r is None else fn(to_input(r)) for r in raws]
    if transform.startswith("truncate[") and kind.source in ("int", "long"):
        # PyIceberg computes on unbounded Python ints; Java (and the column type) wraps results outside
        # the type's range, e.g. truncate[10](INT32_MIN) = INT32_MIN - 2 -> 2147483646 (as Java does).
        # Not followed: Java's TruncateInteger also overflows in ((v % W) + W) for int widths > 2^30,
        # which the spec's formula does not intend; we expect the mathematically floored value.
        bits = 32 if kind.source == "int" else 64
        out = [None if v is None else _wrap(v, bits) for v in out]
    return out


def _min_be_bytes(unscaled: int) -> bytes:
    """Minimal big-endian two's-complement bytes (Java's BigInteger.toByteArray)."""
    n = 1
    while not -(1 << (8 * n - 1)) <= unscaled < 1 << (8 * n - 1):
        n += 1
    return unscaled.to_bytes(n, "big", signed=True)


def _canonical_double_bits(value: float) -> int:
    if math.isnan(value):
        return 0x7FF8_0000_0000_0000
    if value == 0.0:
        return 0  # -0.0 hashes as 0.0
    return _float_bits(value, 64)


def spec_hash_bytes(kind: Kind, raw: Any) -> bytes:
    """The bytes Appendix B hashes for one raw value of ``kind``, written independently of PyIceberg."""
    name = kind.source.split("(")[0].split("[")[0]
    if name in ("int", "long", "date", "time", "timestamp", "timestamptz"):
        return struct.pack("<q", raw)
    if name in ("timestamp_ns", "timestamptz_ns"):
        return struct.pack("<q", raw // 1000)  # floor to micros (Python // floors negatives)
    if name == "boolean":
        return struct.pack("<q", 1 if raw else 0)
    if name == "float":
        return struct.pack("<Q", _canonical_double_bits(struct.unpack("<f", struct.pack("<I", raw))[0]))
    if name == "double":
        return struct.pack("<Q", _canonical_double_bits(struct.unpack("<d", struct.pack("<Q", raw))[0]))
    if name == "decimal":
        return _min_be_bytes(raw)
    if name == "string":
        return str(raw).encode("utf-8")
    return bytes(raw)  # binary, fixed[L], uuid (16 big-endian bytes as stored)


def spec_hash(kind: Kind, raw: Any) -> int:
    return int(mmh3.hash(spec_hash_bytes(kind, raw), seed=0, signed=True))


def _flat(result: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(result, pa.ChunkedArray):
        return pa.concat_arrays(result.chunks) if result.num_chunks else pa.array([], type=result.type)
    return result


def result_values(result: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values of a result: dates, times and timestamps as ints (days as PyIceberg's day values),
    floats as bit patterns (so NaN payloads and -0.0 compare exactly)."""
    flat = _flat(result)
    if pa.types.is_date32(flat.type):
        flat = flat.cast(pa.int32())
    elif pa.types.is_time64(flat.type) or pa.types.is_timestamp(flat.type):
        flat = flat.cast(pa.int64())
    elif pa.types.is_float32(flat.type):
        flat = flat.view(pa.uint32())
    elif pa.types.is_float64(flat.type):
        flat = flat.view(pa.uint64())
    return list(flat.to_pylist())


def expected_arrow_type(transform: str, input_type: pa.DataType) -> pa.DataType:
    if transform.startswith("bucket[") or transform in ("year", "month", "hour", "hash32"):
        return pa.int32()
    if transform == "day":
        return pa.date32()
    return input_type  # identity, void, truncate[W]: the source type


def check_shape(result: Any, values: pa.Array | pa.ChunkedArray, transform: str) -> None:
    """Same container kind, chunking and length as the input; the result type the spec gives."""
    if isinstance(values, pa.ChunkedArray):
        assert isinstance(result, pa.ChunkedArray), (
            f"{transform}: ChunkedArray in, {type(result).__name__} out"
        )
        assert [len(c) for c in result.chunks] == [len(c) for c in values.chunks]
    else:
        assert isinstance(result, pa.Array), f"{transform}: Array in, {type(result).__name__} out"
    assert len(result) == len(values)
    assert result.type == expected_arrow_type(transform, values.type)
    if transform == "void":
        assert result.null_count == len(values)
    else:
        assert result.null_count == values.null_count


def assert_values(got: list[Any], want: list[Any], raws: Sequence[Any], what: str) -> None:
    bad = [
        (i, raws[i], w, g)
        for i, (w, g) in enumerate(zip(want, got, strict=True))
        if w != g or type(w) is not type(g)
    ]
    assert not bad, f"{what}: {len(bad)} mismatches (index, input, expected, got): {bad[:5]}"


def run_against_pyiceberg(
    transform: str, kind: Kind, raws: list[Any], values: pa.Array | pa.ChunkedArray, backend: str
) -> None:
    result = gt.apply(transform, kind.source, values, backend=backend)
    check_shape(result, values, transform)
    got = result_values(result)
    want = pyiceberg_expected(transform, kind, raws)
    assert_values(got, want, raws, f"{transform} on {kind.source}")


# -- randomized comparisons with PyIceberg ------------------------------------------------------------


@pytest.mark.parametrize("family", HASHABLE)
@ORACLE
@given(data=st.data())
def test_bucket_matches_pyiceberg(backend: str, family: str, data: st.DataObject) -> None:
    kind = data.draw(kinds(family), label="kind")
    raws, values = data.draw(arrow_inputs(kind), label="values")
    n = data.draw(BUCKETS, label="N")
    run_against_pyiceberg(f"bucket[{n}]", kind, raws, values, backend)


@pytest.mark.parametrize("family", ["int", "long", "decimal", "string", "binary"])
@ORACLE
@given(data=st.data())
def test_truncate_matches_pyiceberg(backend: str, family: str, data: st.DataObject) -> None:
    kind = data.draw(kinds(family), label="kind")
    w = data.draw(WIDTHS, label="W")
    # results below the type's minimum are tested on their own (test_truncate_integer_overflow_wraps)
    keep = None if family not in ("int", "long") else lambda v: not truncate_overflows(family, v, w)
    raws, values = data.draw(arrow_inputs(kind, keep), label="values")
    run_against_pyiceberg(f"truncate[{w}]", kind, raws, values, backend)


def truncate_overflows(source: str, v: int, width: int) -> bool:
    """Whether truncate[width](v) is below the int/long minimum (the floored multiple does not fit)."""
    return v - v % width < (INT32_MIN if source == "int" else INT64_MIN)


TRUNCATE_OVERFLOW = [
    ("int", INT32_MIN, 10),
    ("int", INT32_MIN + 1, 10),
    ("int", INT32_MIN, INT32_MAX),
    ("long", INT64_MIN, 10),
    ("long", INT64_MIN + 1, 10),
    ("long", INT64_MIN, 3),
    ("long", INT64_MIN + 7, 10),
]


@pytest.mark.parametrize(("source", "v", "width"), TRUNCATE_OVERFLOW)
def test_truncate_integer_overflow_wraps(backend: str, source: str, v: int, width: int) -> None:
    """truncate[W] of values within W of the minimum: the floored multiple wraps, as Java's int/long do
    (truncate[10](-2147483648) = 2147483646); PyIceberg's unbounded result is wrapped to compare."""
    kind = kind_of(source)
    assert truncate_overflows(source, v, width)
    values = kind.build([7, v, None, v, -1], kind.arrow_types[0]).slice(1)
    raws = [v, None, v, -1]
    run_against_pyiceberg(f"truncate[{width}]", kind, raws, values, backend)


TEMPORAL_PAIRS = [
    (t, s)
    for t in ("year", "month", "day", "hour")
    for s in TEMPORAL_SOURCES
    if not (t == "hour" and s == "date")
]


@pytest.mark.parametrize(("transform", "family"), TEMPORAL_PAIRS)
@ORACLE
@given(data=st.data())
def test_temporal_matches_pyiceberg(backend: str, transform: str, family: str, data: st.DataObject) -> None:
    kind = data.draw(kinds(family), label="kind")
    raws, values = data.draw(arrow_inputs(kind), label="values")
    run_against_pyiceberg(transform, kind, raws, values, backend)


@pytest.mark.parametrize("transform", ["identity", "void"])
@pytest.mark.parametrize("family", FAMILIES)
@ORACLE
@given(data=st.data())
def test_identity_and_void_match_pyiceberg(
    backend: str, transform: str, family: str, data: st.DataObject
) -> None:
    kind = data.draw(kinds(family), label="kind")
    raws, values = data.draw(arrow_inputs(kind), label="values")
    run_against_pyiceberg(transform, kind, raws, values, backend)
    if transform == "identity":
        result = gt.apply(transform, kind.source, values, backend=backend)
        assert result.equals(values) or kind.bits is not None  # NaN != NaN under equals(); bits checked above


# -- hash32 against mmh3 (Appendix B), PyIceberg and the spec's test vectors ----------------------------


@pytest.mark.parametrize("family", [*HASHABLE, "boolean", "float", "double"])
@ORACLE
@given(data=st.data())
def test_hash32_matches_mmh3(backend: str, family: str, data: st.DataObject) -> None:
    kind = data.draw(kinds(family), label="kind")
    raws, values = data.draw(arrow_inputs(kind), label="values")
    result = gt.hash32(kind.source, values, backend=backend)
    check_shape(result, values, "hash32")
    got = result_values(result)
    assert_values(
        got, [None if r is None else spec_hash(kind, r) for r in raws], raws, f"hash32 {kind.source}"
    )
    if family in HASHABLE:  # PyIceberg's unreduced hash agrees too
        fn = pt.BucketTransform(1).transform(kind.iceberg, bucket=False)
        pyi = [None if r is None else fn(kind.to_oracle(r)) for r in raws]
        assert_values(got, pyi, raws, f"hash32 {kind.source} vs PyIceberg")


_TS_VECTOR = _micros(datetime(2017, 11, 16, 22, 31, 8))
APPENDIX_B_VECTORS = [
    ("int", 34, 2017239379),
    ("long", 34, 2017239379),
    ("decimal(4,2)", 1420, -500754589),
    ("date", _days(date(2017, 11, 16)), -653330422),
    ("time", 81_068_000_000, -662762989),
    ("timestamp", _TS_VECTOR, -2047944441),
    ("timestamp", _TS_VECTOR + 1, -1207196810),
    ("timestamptz", _TS_VECTOR, -2047944441),
    ("timestamptz", _TS_VECTOR + 1, -1207196810),
    ("timestamp_ns", _TS_VECTOR * 1000, -2047944441),
    ("timestamp_ns", _TS_VECTOR * 1000 + 1001, -1207196810),
    ("timestamptz_ns", _TS_VECTOR * 1000, -2047944441),
    ("timestamptz_ns", _TS_VECTOR * 1000 + 1001, -1207196810),
    ("string", "iceberg", 1210000089),
    ("uuid", uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes, 1488055340),
    ("fixed[4]", b"\x00\x01\x02\x03", -188683207),
    ("binary", b"\x00\x01\x02\x03", -188683207),
    ("boolean", True, 1392991556),
    ("float", _float_bits(1.0, 32), -142385009),
    ("float", _float_bits(0.0, 32), 1669671676),
    ("float", _float_bits(-0.0, 32), 1669671676),
    ("double", _float_bits(1.0, 64), -142385009),
    ("double", _float_bits(0.0, 64), 1669671676),
    ("double", _float_bits(-0.0, 64), 1669671676),
]


@pytest.mark.parametrize(("source", "raw", "want"), APPENDIX_B_VECTORS)
def test_hash32_appendix_b_vectors(backend: str, source: str, raw: Any, want: int) -> None:
    kind = kind_of(source)
    assert spec_hash(kind, raw) == want  # the oracle itself reproduces the spec
    values = kind.build([raw, None, raw], kind.arrow_types[-1])
    assert gt.hash32(source, values, backend=backend).to_pylist() == [want, None, want]


# -- temporal values beyond Python's datetime range: integer floor division + NumPy's calendar -------------


def _numpy_calendar(days: int, unit: str) -> int:
    """Years or months since 1970 of a day count, from NumPy's proleptic Gregorian datetime64."""
    return int(np.array([days], dtype="M8[D]").astype(f"M8[{unit}]").astype(np.int64)[0])


def temporal_oracle(transform: str, source: str, v: int) -> int:
    days = v if source == "date" else v // MICROS_PER_DAY
    if transform == "year":
        return _numpy_calendar(days, "Y")
    if transform == "month":
        return _numpy_calendar(days, "M")
    if transform == "day":
        return days
    return v // MICROS_PER_HOUR


# micros whose hour still fits the int result type (beyond that Java's (int) cast would wrap)
_HOUR_LIMIT = INT32_MAX * MICROS_PER_HOUR
EXTREME_PAIRS = [
    (t, s) for t in ("year", "month", "day", "hour") for s in ("date", "timestamp", "timestamptz")
]


@pytest.mark.parametrize(("transform", "source"), [p for p in EXTREME_PAIRS if p != ("hour", "date")])
@ORACLE
@given(data=st.data())
def test_temporal_extremes_match_numpy(
    backend: str, transform: str, source: str, data: st.DataObject
) -> None:
    if source == "date":
        edges = [INT32_MIN, INT32_MIN + 1, INT32_MAX, MIN_DAYS - 1, MAX_DAYS + 1, -1, 0]
        values = st.one_of(st.sampled_from(edges), st.integers(INT32_MIN, INT32_MAX))
    else:
        lo, hi = (-_HOUR_LIMIT, _HOUR_LIMIT) if transform == "hour" else (INT64_MIN, INT64_MAX)
        edges = [lo, lo + 1, hi, hi - 1, MIN_MICROS - 1, MAX_MICROS + 1, -1, 0]
        values = st.one_of(st.sampled_from(edges), st.integers(lo, hi))
    raws = data.draw(st.lists(st.one_of(st.none(), values), max_size=MAX_VALUES), label="raws")
    kind = kind_of(source)
    arrow_type = kind.arrow_types[0]
    k = data.draw(st.integers(1, 21).filter(lambda k: k % 8 != 0), label="offset")
    array = kind.build([0] * k + raws, arrow_type).slice(k)
    result = gt.apply(transform, source, array, backend=backend)
    check_shape(result, array, transform)
    want = [None if v is None else temporal_oracle(transform, source, v) for v in raws]
    assert_values(result_values(result), want, raws, f"{transform} on {source}")


# -- the whole transform x type matrix: applicability, errors, result types, chunking ----------------------

MATRIX_TRANSFORMS = ("identity", "void", "bucket[16]", "truncate[10]", "year", "month", "day", "hour")
MATRIX_TYPES = (
    "unknown",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "decimal(9,2)",
    "decimal(38,0)",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "timestamp_ns",
    "timestamptz_ns",
    "string",
    "uuid",
    "fixed[4]",
    "binary",
)
MATRIX = [(t, s) for t in MATRIX_TRANSFORMS for s in MATRIX_TYPES]
# PyIceberg 0.12's can_transform agrees with the spec table on every pair above (verified by this test),
# including timestamp_ns/timestamptz_ns for bucket/year/month/day/hour, void on every type and identity
# on unknown; geometry, geography and variant are not gpu_engine primitive types and are not listed.
VALID = [(t, s) for t, s in MATRIX if pyiceberg_transform(t).can_transform(kind_of(s).iceberg)]


def _samples(kind: Kind, transform: str) -> list[Any]:
    """Edge values of ``kind`` plus a null; truncate skips the int/long values whose result overflows
    (those are test_truncate_integer_overflow_wraps' cases)."""
    samples = list(kind.samples)
    if transform.startswith("truncate[") and kind.source in ("int", "long"):
        width = int(transform[len("truncate[") : -1])
        samples = [v for v in samples if not truncate_overflows(kind.source, v, width)]
    return [*samples, None] if samples else [None, None, None]


def _norm(text: str) -> str:
    return text.replace(" ", "").lower()


@pytest.mark.parametrize(("transform", "source"), MATRIX)
def test_can_apply_matches_pyiceberg(backend: str, transform: str, source: str) -> None:
    kind = kind_of(source)
    values = kind.build(_samples(kind, transform), kind.arrow_types[0])
    if not pyiceberg_transform(transform).can_transform(kind.iceberg):
        with pytest.raises(UnsupportedTransform) as err:
            gt.apply(transform, source, values, backend=backend)
        message = _norm(str(err.value))
        assert _norm(transform) in message and _norm(source) in message, str(err.value)
        return
    raws = _samples(kind, transform)
    run_against_pyiceberg(transform, kind, raws, values, backend)


@pytest.mark.parametrize(("transform", "source"), VALID)
def test_chunked_in_chunked_out(backend: str, transform: str, source: str) -> None:
    kind = kind_of(source)
    raws = _samples(kind, transform)
    arrow_type = kind.arrow_types[-1]
    half = len(raws) // 2
    chunks = [
        kind.build(raws[:half], arrow_type),
        kind.build([], arrow_type),
        kind.build([*raws[:3], *raws[half:]], arrow_type).slice(3),
    ]
    values = pa.chunked_array(chunks, type=arrow_type)
    run_against_pyiceberg(transform, kind, raws, values, backend)
    empty = gt.apply(transform, source, pa.chunked_array([], type=arrow_type), backend=backend)
    check_shape(empty, pa.chunked_array([], type=arrow_type), transform)
    assert empty.num_chunks == 0


@pytest.mark.parametrize(("transform", "source"), VALID)
def test_empty_and_all_null_arrays(backend: str, transform: str, source: str) -> None:
    kind = kind_of(source)
    arrow_type = kind.arrow_types[0]
    for raws in ([], [None] * 11):
        values = kind.build(raws, arrow_type)
        run_against_pyiceberg(transform, kind, raws, values, backend)
        run_against_pyiceberg(transform, kind, raws[1:], values.slice(1), backend)


def test_hash32_undefined_for_unknown(backend: str) -> None:
    with pytest.raises(UnsupportedTransform, match="unknown"):
        gt.hash32("unknown", pa.nulls(3), backend=backend)


@pytest.mark.parametrize(
    "transform", ["bucket[0]", "bucket[-1]", "bucket[2147483648]", "truncate[0]", "bucket"]
)
def test_invalid_parameters_raise(backend: str, transform: str) -> None:
    with pytest.raises(UnsupportedTransform):
        gt.apply(transform, "long", pa.array([1, 2], pa.int64()), backend=backend)
