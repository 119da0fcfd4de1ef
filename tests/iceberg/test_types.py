"""Iceberg primitive type strings and their Arrow mapping."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import InvalidType
from gpu_engine.iceberg import types


@pytest.mark.parametrize(
    ("text", "arrow"),
    [
        ("boolean", pa.bool_()),
        ("int", pa.int32()),
        ("long", pa.int64()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("date", pa.date32()),
        ("time", pa.time64("us")),
        ("timestamp", pa.timestamp("us")),
        ("timestamptz", pa.timestamp("us", tz="UTC")),
        ("timestamp_ns", pa.timestamp("ns")),
        ("timestamptz_ns", pa.timestamp("ns", tz="UTC")),
        ("string", pa.large_string()),
        ("uuid", pa.binary(16)),
        ("binary", pa.large_binary()),
        ("decimal(9,2)", pa.decimal128(9, 2)),
        (" Decimal( 38 , 0 ) ", pa.decimal128(38, 0)),
        ("fixed[16]", pa.binary(16)),
        ("unknown", pa.null()),
    ],
)
def test_parse_and_arrow(text: str, arrow: pa.DataType) -> None:
    parsed = types.parse_type(text)
    assert types.to_arrow(parsed) == arrow
    assert types.parse_type(str(parsed)) == parsed


@pytest.mark.parametrize(
    "text", ["decimal(39,0)", "decimal(5,6)", "fixed[0]", "lon", "list<int>", "decimal(9)"]
)
def test_bad_type_strings_are_named(text: str) -> None:
    with pytest.raises(InvalidType, match=r"decimal|fixed|unknown Iceberg primitive type"):
        types.parse_type(text)
