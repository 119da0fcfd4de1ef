"""Reading one file column as an Iceberg primitive: promotions, legacy physical forms, refusals, overflow,
and statistics values; expected values computed by hand."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.errors import DataFileError, SchemaMismatch
from gpu_engine.iceberg import types as it
from gpu_engine.io.arrow_schema import to_arrow_type
from gpu_engine.io.parquet_types import converter, stats_value

WHERE = "x.parquet: column 'c' (field id 7)"


def conv(values: list[Any], file_type: pa.DataType, t: it.PrimitiveType, **kw: Any) -> pa.Array:
    arr = pa.array(values, file_type)
    out = converter(file_type, t, WHERE, **kw)(arr, kw.get("seconds"))
    assert out.type == to_arrow_type(t), f"{out.type} != {to_arrow_type(t)}"
    return out


def ints(arr: pa.Array) -> list[Any]:
    return list(arr.cast(pa.int64()).to_pylist())


@pytest.mark.parametrize(
    ("file_type", "t", "values"),
    [
        (pa.int8(), it.INT, [-128, 127, None]),
        (pa.int16(), it.INT, [-32768, 32767]),
        (pa.uint8(), it.INT, [0, 255]),
        (pa.uint16(), it.INT, [65535]),
        (pa.uint32(), it.INT, [0, 2**31 - 1]),
        (pa.int32(), it.LONG, [-(2**31), 2**31 - 1]),
        (pa.uint32(), it.LONG, [2**32 - 1]),
        (pa.uint64(), it.LONG, [0, 2**63 - 1, None]),
        (pa.float16(), it.FLOAT, [0.5, -2.0, None]),
        (pa.float16(), it.DOUBLE, [65504.0]),
        (pa.float32(), it.DOUBLE, [0.25, 3.0]),
        (pa.bool_(), it.BOOLEAN, [True, None, False]),
        (pa.string(), it.STRING, ["a", None]),
        (pa.string_view(), it.STRING, ["view"]),
        (pa.binary(), it.STRING, [b"ok", None]),
        (pa.string(), it.BINARY, ["x"]),
        (pa.binary(3), it.BINARY, [b"abc"]),
        (pa.binary(3), it.fixed(3), [b"abc"]),
        (pa.binary(), it.GeometryType("geometry"), [b"\x01\x01\x00\x00\x00"]),
    ],
)
def test_exact_and_widening_reads(file_type: pa.DataType, t: it.PrimitiveType, values: list[Any]) -> None:
    out = conv(values, file_type, t).to_pylist()
    expected = [v.encode() if isinstance(v, str) and t.name == "binary" else v for v in values]
    expected = [v.decode() if isinstance(v, bytes) and t.name == "string" else v for v in expected]
    assert out == expected


@pytest.mark.parametrize(
    ("file_type", "t", "value"),
    [(pa.uint32(), it.INT, 2**31), (pa.uint64(), it.LONG, 2**63), (pa.uint64(), it.LONG, 2**64 - 1)],
)
def test_unsigned_values_that_do_not_fit(file_type: pa.DataType, t: it.PrimitiveType, value: int) -> None:
    with pytest.raises(
        DataFileError, match=rf"x\.parquet: column 'c' \(field id 7\): unsigned value {value}"
    ):
        conv([1, value], file_type, t)


def test_decimals_of_every_width() -> None:
    for file_type in (pa.decimal32(5, 2), pa.decimal64(12, 2), pa.decimal128(9, 2)):
        out = conv([Decimal("-123.45"), None, Decimal("0.01")], file_type, it.decimal(18, 2))
        assert out.to_pylist() == [Decimal("-123.45"), None, Decimal("0.01")]


def test_temporal_units() -> None:
    assert ints(conv([1500, None], pa.time32("ms"), it.TIME)) == [1_500_000, None]
    assert ints(conv([1_999, 86_399_999_999_999], pa.time64("ns"), it.TIME)) == [1, 86_399_999_999]
    assert ints(conv([-1, 1], pa.timestamp("s"), it.TIMESTAMP)) == [-1_000_000, 1_000_000]
    assert ints(conv([-1, 1], pa.timestamp("ms"), it.TIMESTAMP)) == [-1000, 1000]
    # nanoseconds floor to microseconds (toward negative infinity, not toward zero)
    assert ints(conv([-1, -1000, -1001, 1999, None], pa.timestamp("ns"), it.TIMESTAMP)) == [
        -1,
        -1,
        -2,
        1,
        None,
    ]
    assert ints(conv([5], pa.timestamp("us"), it.TIMESTAMP_NS)) == [5000]
    # isAdjustedToUTC either way: the stored count is kept, only the zone annotation changes
    tz = conv([7], pa.timestamp("us"), it.TIMESTAMPTZ)
    assert tz.type == pa.timestamp("us", tz="UTC") and ints(tz) == [7]
    assert ints(conv([7], pa.timestamp("us", tz="America/New_York"), it.TIMESTAMP)) == [7]
    assert ints(conv([7], pa.timestamp("ns", tz="UTC"), it.TIMESTAMPTZ_NS)) == [7]
    assert ints(conv([1, None], pa.date32(), it.TIMESTAMP)) == [86_400_000_000, None]


def test_out_of_range_values_are_errors() -> None:
    with pytest.raises(DataFileError, match=r"x\.parquet: column 'c' \(field id 7\).*timestamp_ns"):
        conv([2**31 - 1], pa.date32(), it.TIMESTAMP_NS)
    with pytest.raises(DataFileError, match="timestamp"):
        conv([2**62], pa.timestamp("ms"), it.TIMESTAMP)
    with pytest.raises(DataFileError, match="string"):
        conv([b"\xff"], pa.binary(), it.STRING)


@pytest.mark.parametrize(
    ("file_type", "t"),
    [
        (pa.int64(), it.INT),
        (pa.uint64(), it.INT),
        (pa.float64(), it.FLOAT),
        (pa.int32(), it.FLOAT),
        (pa.decimal128(10, 2), it.decimal(9, 2)),
        (pa.decimal128(9, 3), it.decimal(9, 2)),
        (pa.int64(), it.decimal(18, 0)),
        (pa.date32(), it.TIMESTAMPTZ),
        (pa.timestamp("us"), it.DATE),
        (pa.int64(), it.TIMESTAMP),
        (pa.binary(), it.UUID),
        (pa.binary(15), it.UUID),
        (pa.binary(4), it.fixed(5)),
        (pa.string(), it.fixed(5)),
        (pa.int32(), it.STRING),
        (pa.bool_(), it.INT),
        (pa.time64("us"), it.TIMESTAMP),
    ],
)
def test_refused_reads_name_both_types(file_type: pa.DataType, t: it.PrimitiveType) -> None:
    pattern = rf"x\.parquet: column 'c' \(field id 7\): file column of type .* Iceberg {re.escape(str(t))}"
    with pytest.raises(SchemaMismatch, match=pattern):
        converter(file_type, t, WHERE)


def test_uuid_extension_dictionary_and_null_columns() -> None:
    raw = bytes(range(16))
    ext = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([raw, None], pa.binary(16)))
    assert converter(ext.type, it.UUID, WHERE)(ext, None).to_pylist() == [raw, None]
    dictionary = pa.array(["b", "a", None, "b"]).dictionary_encode()
    out = converter(dictionary.type, it.STRING, WHERE)(dictionary, None)
    assert out.type == pa.large_string() and out.to_pylist() == ["b", "a", None, "b"]
    nulls = pa.nulls(3)
    out = converter(pa.null(), it.decimal(9, 2), WHERE)(nulls, None)
    assert out.type == pa.decimal128(9, 2) and out.null_count == 3


def test_int96_values_are_checked_against_the_seconds_decoding() -> None:
    run = converter(pa.timestamp("us"), it.TIMESTAMP, WHERE, int96=True)
    micros = pa.array([1_704_141_296_123_456, None, -1], pa.timestamp("us"))
    seconds = pa.array([1_704_141_296, None, -1], pa.timestamp("s"))
    assert ints(run(micros, seconds)) == [1_704_141_296_123_456, None, -1]
    wrapped = pa.array([-7188624036226874385], pa.timestamp("us"))  # pyarrow's decoding of year 290000
    with pytest.raises(
        DataFileError, match=r"x\.parquet: column 'c' \(field id 7\): INT96 timestamp in row 0"
    ):
        run(wrapped, pa.array([361746257437964], pa.timestamp("s")))
    with pytest.raises(DataFileError, match="INT96"):
        run(micros, None)


@pytest.mark.parametrize(
    ("raw", "file_type", "physical", "t", "expected"),
    [
        (5, pa.int32(), "INT32", it.INT, 5),
        (5, pa.int32(), "INT32", it.LONG, 5),
        (1.5, pa.float32(), "FLOAT", it.DOUBLE, 1.5),
        (True, pa.bool_(), "BOOLEAN", it.BOOLEAN, True),
        (b"abc", pa.string(), "BYTE_ARRAY", it.STRING, "abc"),
        (b"ab\xe2\x82", pa.string(), "BYTE_ARRAY", it.STRING, None),  # truncated inside a character
        (b"\x00\x01", pa.binary(), "BYTE_ARRAY", it.BINARY, b"\x00\x01"),
        (b"\xff\x85", pa.decimal128(5, 2), "FIXED_LEN_BYTE_ARRAY", it.decimal(9, 2), Decimal("-1.23")),
        (-123, pa.decimal128(5, 2), "INT32", it.decimal(5, 2), Decimal("-1.23")),
        (-123, pa.decimal128(5, 3), "INT32", it.decimal(5, 2), None),
        (  # 38 digits: exact, not rounded to the default context's 28 (a filter on the max missed it)
            (10**37 + 1).to_bytes(16, "big", signed=True),
            pa.decimal128(38, 10),
            "FIXED_LEN_BYTE_ARRAY",
            it.decimal(38, 10),
            Decimal("1000000000000000000000000000.0000000001"),
        ),
        (1500, pa.time32("ms"), "INT32", it.TIME, 1_500_000),
        (-1, pa.timestamp("ns"), "INT64", it.TIMESTAMP, -1),
        (-1001, pa.timestamp("ns"), "INT64", it.TIMESTAMP, -2),
        (2, pa.timestamp("ms"), "INT64", it.TIMESTAMPTZ, 2000),
        (1, pa.date32(), "INT32", it.TIMESTAMP, 86_400_000_000),
        (1, pa.date32(), "INT32", it.TIMESTAMP_NS, 86_400_000_000_000),
        (b"\x00" * 12, pa.timestamp("us"), "INT96", it.TIMESTAMP, None),
        (7, pa.uint32(), "INT32", it.LONG, None),
        (b"\x00\x3c", pa.float16(), "FIXED_LEN_BYTE_ARRAY", it.FLOAT, None),
        (None, pa.int32(), "INT32", it.INT, None),
    ],
)
def test_stats_values(
    raw: Any, file_type: pa.DataType, physical: str, t: it.PrimitiveType, expected: Any
) -> None:
    assert stats_value(raw, file_type, physical, t) == expected
