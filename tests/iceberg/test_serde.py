"""Appendix D binary single-value serialization: round trips, the spec's values, promotions, bad input."""

from __future__ import annotations

import math
import re
import struct
import uuid
from decimal import Decimal
from typing import Any

import mmh3
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyiceberg import conversions as pyi_conv
from pyiceberg import types as pyi_types

from gpu_engine.errors import SingleValueError
from gpu_engine.iceberg import serde
from gpu_engine.iceberg import types as it

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
FLOAT32 = st.floats(width=32, allow_nan=False)
GEO_POINT = st.lists(st.floats(allow_nan=False), min_size=2, max_size=4).map(tuple)


def decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = 10**precision - 1
    return st.integers(-bound, bound).map(
        lambda u: Decimal((int(u < 0), tuple(int(d) for d in str(abs(u))), -scale))
    )


STRATEGIES: list[tuple[it.PrimitiveType, st.SearchStrategy[Any]]] = [
    (it.BOOLEAN, st.booleans()),
    (it.INT, I32),
    (it.LONG, I64),
    (it.FLOAT, FLOAT32),
    (it.DOUBLE, st.floats(allow_nan=False)),
    (it.DATE, I32),
    (it.TIME, st.integers(0, 86_400_000_000 - 1)),
    (it.TIMESTAMP, I64),
    (it.TIMESTAMPTZ, I64),
    (it.TIMESTAMP_NS, I64),
    (it.TIMESTAMPTZ_NS, I64),
    (it.STRING, st.text()),
    (it.UUID, st.uuids()),
    (it.fixed(1), st.binary(min_size=1, max_size=1)),
    (it.fixed(16), st.binary(min_size=16, max_size=16)),
    (it.BINARY, st.binary()),
    (it.decimal(1, 0), decimals(1, 0)),
    (it.decimal(9, 2), decimals(9, 2)),
    (it.decimal(18, 6), decimals(18, 6)),
    (it.decimal(38, 10), decimals(38, 10)),
    (it.decimal(38, 38), decimals(38, 38)),
    (it.parse_type("geometry"), GEO_POINT),
    (it.parse_type("geography(OGC:CRS84, karney)"), GEO_POINT),
    (it.VARIANT, st.binary()),
]


@pytest.mark.parametrize(("t", "strategy"), STRATEGIES, ids=[str(t) for t, _ in STRATEGIES])
def test_round_trip(t: it.PrimitiveType, strategy: st.SearchStrategy[Any]) -> None:
    @given(strategy)
    def check(value: Any) -> None:
        data = serde.to_bytes(t, value)
        back = serde.from_bytes(t, data)
        assert back == value
        assert type(back) is type(value)
        assert serde.to_bytes(t, back) == data
        if isinstance(t, it.DecimalType):
            assert back.as_tuple().exponent == -t.scale
            # minimum length: dropping the first byte would change the value
            assert len(data) == 1 or int.from_bytes(data[1:], "big", signed=True) != int.from_bytes(
                data, "big", signed=True
            )

    check()


@pytest.mark.parametrize(("t", "strategy"), STRATEGIES, ids=[str(t) for t, _ in STRATEGIES])
def test_decode_array_matches_from_bytes(t: it.PrimitiveType, strategy: st.SearchStrategy[Any]) -> None:
    @given(st.lists(st.one_of(st.none(), strategy), max_size=20), st.integers(0, 3))
    def check(values: list[Any], offset: int) -> None:
        raw = pa.array([None, None, None] + [None if v is None else serde.to_bytes(t, v) for v in values])
        arr = raw.slice(offset if offset < 3 else 3)  # exercise non-zero array offsets
        decoded = serde.decode_array(t, arr)
        assert decoded.type == serde.physical_arrow_type(t)
        expected = [None if b is None else serde.from_bytes(t, b) for b in arr.to_pylist()]
        if t.name == "uuid":
            expected = [None if u is None else u.bytes for u in expected]
        if isinstance(t, (it.GeometryType, it.GeographyType)):
            expected = [None if p is None else list(p) for p in expected]
        assert decoded.to_pylist() == expected

    check()


# -- the spec's own values (Appendix B's test values; their bytes hash to the listed Murmur3 results) --------


SPEC_VALUES = [
    (it.INT, 34, bytes.fromhex("22000000"), None),
    (it.LONG, 34, bytes.fromhex("2200000000000000"), 2017239379),
    (it.decimal(4, 2), Decimal("14.20"), bytes.fromhex("058c"), -500754589),
    (it.DATE, 17486, struct.pack("<i", 17486), None),  # 2017-11-16
    (it.TIME, 81_068_000_000, struct.pack("<q", 81_068_000_000), -662762989),  # 22:31:08
    (it.TIMESTAMP, 1_510_871_468_000_000, struct.pack("<q", 1_510_871_468_000_000), -2047944441),
    (it.TIMESTAMPTZ, 1_510_871_468_000_001, struct.pack("<q", 1_510_871_468_000_001), -1207196810),
    (it.TIMESTAMP_NS, 1_510_871_468_000_001_001, struct.pack("<q", 1_510_871_468_000_001_001), None),
    (it.STRING, "iceberg", b"iceberg", 1210000089),
    (
        it.UUID,
        uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7"),
        1488055340,
    ),
    (it.fixed(4), b"\x00\x01\x02\x03", b"\x00\x01\x02\x03", -188683207),
    (it.BINARY, b"\x00\x01\x02\x03", b"\x00\x01\x02\x03", -188683207),
    (it.BOOLEAN, True, b"\x01", None),
    (it.BOOLEAN, False, b"\x00", None),
    (it.FLOAT, 1.0, struct.pack("<f", 1.0), None),
    (it.DOUBLE, -0.0, struct.pack("<d", -0.0), None),
]


@pytest.mark.parametrize(("t", "value", "data", "hash32"), SPEC_VALUES, ids=[str(v[0]) for v in SPEC_VALUES])
def test_spec_values(t: it.PrimitiveType, value: Any, data: bytes, hash32: int | None) -> None:
    assert serde.to_bytes(t, value) == data
    assert serde.from_bytes(t, data) == value
    if hash32 is not None:
        assert mmh3.hash(data, 0, signed=True) == hash32


@pytest.mark.parametrize(
    ("value", "hex_"),
    [
        (Decimal("0.00"), "00"),
        (Decimal("1.27"), "7f"),
        (Decimal("1.28"), "0080"),
        (Decimal("-1.28"), "80"),
        (Decimal("-1.29"), "ff7f"),
        (Decimal("-0.01"), "ff"),
        (Decimal("327.67"), "7fff"),
        (Decimal("327.68"), "008000"),
    ],
)
def test_decimal_minimum_twos_complement(value: Decimal, hex_: str) -> None:
    t = it.decimal(9, 2)
    assert serde.to_bytes(t, value).hex() == hex_
    assert serde.from_bytes(t, bytes.fromhex(hex_)) == value


def test_decimal_is_exact_beyond_28_digits() -> None:
    t = it.decimal(38, 23)
    value = Decimal("-5432109876.10987654321098765432109")
    assert serde.from_bytes(t, serde.to_bytes(t, value)) == value
    assert serde.to_bytes(t, Decimal("1.5")) == serde.to_bytes(t, Decimal("1.50000000000000000000000"))


def test_geospatial_bounds_are_points() -> None:
    t = it.parse_type("geometry")
    assert serde.from_bytes(t, struct.pack("<2d", 1.5, -2.0)) == (1.5, -2.0)
    xyzm = serde.from_bytes(t, struct.pack("<4d", 1.0, 2.0, math.nan, 4.0))  # x:y:NaN:m when only z unset
    assert xyzm[:2] == (1.0, 2.0) and math.isnan(xyzm[2]) and xyzm[3] == 4.0
    assert serde.to_bytes(t, (1.0, 2.0, 3.0)) == struct.pack("<3d", 1.0, 2.0, 3.0)


# -- bounds written before a type promotion ("Schema Evolution": infer the type by length) -------------------


@pytest.mark.parametrize(
    ("t", "data", "value"),
    [
        (it.LONG, struct.pack("<i", -7), -7),
        (it.LONG, struct.pack("<q", -7), -7),
        (it.DOUBLE, struct.pack("<f", 1.5), 1.5),
        (it.DOUBLE, struct.pack("<d", 1.5), 1.5),
        (it.TIMESTAMP, struct.pack("<i", 17486), 17486 * 86_400_000_000),
        (it.TIMESTAMP_NS, struct.pack("<i", -1), -86_400_000_000_000),
        (it.decimal(20, 5), serde.to_bytes(it.decimal(9, 5), Decimal("1234.56789")), Decimal("1234.56789")),
    ],
)
def test_promoted_bounds(t: it.PrimitiveType, data: bytes, value: Any) -> None:
    assert serde.from_bytes(t, data) == value
    assert serde.decode_array(t, pa.array([data, None])).to_pylist() == [value, None]


def test_promoted_date_bounds_past_the_new_range_are_unknown() -> None:
    """A date bound of a column promoted to timestamp_ns that nanoseconds cannot hold (9999-12-31, 0001-01-01)
    would wrap in int64 and prune files holding matching rows: it reads as no bound (the read of such a
    value then fails, as the spec asks)."""
    days = [18262, 2932896, -719162, None]  # 2020-01-01, 9999-12-31, 0001-01-01
    arr = pa.array([None if d is None else struct.pack("<i", d) for d in days])
    assert serde.decode_array(it.TIMESTAMP_NS, arr).to_pylist() == [
        18262 * 86_400_000_000_000,
        None,
        None,
        None,
    ]
    assert serde.decode_array(it.TIMESTAMP, arr).to_pylist()[1] == 2932896 * 86_400_000_000  # micros fit


@pytest.mark.parametrize(
    ("t", "values", "decoded"),
    [
        (it.STRING, [b"ok", b"AAAA\xe2\x80", None, b"fine"], ["ok", None, None, "fine"]),
        (it.LONG, [struct.pack("<q", 7), b"\x01\x02\x03", None], [7, None, None]),
        (it.decimal(9, 2), [b"", b"\x01"], [None, Decimal("0.01")]),
    ],
)
def test_values_that_do_not_decode_raise_or_are_unknown(
    t: it.PrimitiveType, values: list[bytes | None], decoded: list[Any]
) -> None:
    """Strict by default (a partition value must decode); bounds ask for invalid values as unknown."""
    arr = pa.array(values, pa.binary())
    assert serde.decode_array(t, arr, invalid_as_unknown=True).to_pylist() == decoded
    with pytest.raises(SingleValueError):
        serde.decode_array(t, arr)
    assert serde.decode_array(t, pa.array([], pa.binary()), invalid_as_unknown=True).to_pylist() == []


def test_decode_array_mixes_promoted_lengths() -> None:
    arr = pa.array([struct.pack("<i", 5), struct.pack("<q", 2**40), None, struct.pack("<i", -1)])
    assert serde.decode_array(it.LONG, arr).to_pylist() == [5, 2**40, None, -1]
    floats = pa.array([struct.pack("<f", 0.5), struct.pack("<d", 0.1)])
    assert serde.decode_array(it.DOUBLE, floats).to_pylist() == [0.5, 0.1]


# -- bad input names the type and the length -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "data"),
    [
        (it.INT, b"\x01\x02\x03"),
        (it.INT, b"\x00" * 8),
        (it.LONG, b"\x00" * 5),
        (it.FLOAT, b"\x00" * 8),
        (it.DOUBLE, b"\x00" * 2),
        (it.DATE, b"\x00" * 8),
        (it.TIME, b"\x00" * 4),
        (it.TIMESTAMPTZ_NS, b"\x00" * 7),
        (it.BOOLEAN, b""),
        (it.BOOLEAN, b"\x00\x01"),
        (it.UUID, b"\x00" * 15),
        (it.fixed(4), b"\x00" * 5),
        (it.decimal(9, 2), b""),
        (it.decimal(2, 0), bytes.fromhex("0186a0")),  # 100000 has more than 2 digits
        (it.parse_type("geography"), b"\x00" * 8),
        (it.STRING, b"\xff\xfe"),
        (it.UNKNOWN, b"\x00"),
    ],
)
def test_bad_bytes_raise_naming_type_and_length(t: it.PrimitiveType, data: bytes) -> None:
    with pytest.raises(SingleValueError) as info:
        serde.from_bytes(t, data)
    assert str(t) in str(info.value)
    assert f"({len(data)} bytes)" in str(info.value)
    if t.name not in ("unknown",):
        with pytest.raises(SingleValueError, match=re.escape(str(t))):
            serde.decode_array(t, pa.array([data], pa.binary()))


@pytest.mark.parametrize(
    ("t", "value"),
    [
        (it.INT, 2**31),
        (it.LONG, -(2**63) - 1),
        (it.INT, 1.5),
        (it.INT, True),
        (it.BOOLEAN, 1),
        (it.FLOAT, "1.0"),
        (it.FLOAT, 1e300),
        (it.STRING, b"x"),
        (it.UUID, b"short"),
        (it.fixed(3), b"toolong"),
        (it.decimal(9, 2), Decimal("1.234")),
        (it.decimal(3, 2), Decimal("10.00")),
        (it.decimal(9, 2), 1.5),
        (it.decimal(9, 2), Decimal("NaN")),
        (it.parse_type("geometry"), (1.0,)),
        (it.UNKNOWN, 1),
        (it.LONG, None),
    ],
)
def test_bad_values_raise(t: it.PrimitiveType, value: Any) -> None:
    with pytest.raises(SingleValueError, match=re.escape(str(t))):
        serde.to_bytes(t, value)


# -- oracle: PyIceberg's conversions agree wherever both define the value ------------------------------------

PYICEBERG_TYPES: list[tuple[it.PrimitiveType, Any]] = [
    (it.BOOLEAN, pyi_types.BooleanType()),
    (it.INT, pyi_types.IntegerType()),
    (it.LONG, pyi_types.LongType()),
    (it.FLOAT, pyi_types.FloatType()),
    (it.DOUBLE, pyi_types.DoubleType()),
    (it.DATE, pyi_types.DateType()),
    (it.TIME, pyi_types.TimeType()),
    (it.TIMESTAMP, pyi_types.TimestampType()),
    (it.TIMESTAMPTZ, pyi_types.TimestamptzType()),
    (it.STRING, pyi_types.StringType()),
    (it.UUID, pyi_types.UUIDType()),
    (it.fixed(16), pyi_types.FixedType(16)),
    (it.BINARY, pyi_types.BinaryType()),
    (it.decimal(9, 2), pyi_types.DecimalType(9, 2)),
    (it.decimal(38, 10), pyi_types.DecimalType(38, 10)),
]


@pytest.mark.parametrize(("t", "pyi_t"), PYICEBERG_TYPES, ids=[str(t) for t, _ in PYICEBERG_TYPES])
def test_agrees_with_pyiceberg(t: it.PrimitiveType, pyi_t: Any) -> None:
    strategy = dict(STRATEGIES)[t]

    @given(strategy)
    def check(value: Any) -> None:
        data = serde.to_bytes(t, value)
        assert pyi_conv.to_bytes(pyi_t, value) == data
        theirs = pyi_conv.from_bytes(pyi_t, data)
        ours = serde.from_bytes(t, data)
        assert (ours.bytes if t.name == "uuid" else ours) == theirs

    check()
