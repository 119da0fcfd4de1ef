"""The spec's own examples: Appendix B hash vectors, truncate and temporal examples, on every backend."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine import transforms

UTC = dt.UTC
PST = dt.timezone(dt.timedelta(hours=-8))

# (Iceberg type, Arrow array holding the spec's test value(s), expected hashes) from Appendix B.
HASH_VECTORS: list[tuple[str, pa.Array, list[int]]] = [
    ("int", pa.array([34], pa.int32()), [2017239379]),
    ("long", pa.array([34], pa.int64()), [2017239379]),
    ("decimal(4, 2)", pa.array([Decimal("14.20")], pa.decimal128(4, 2)), [-500754589]),
    ("date", pa.array([dt.date(2017, 11, 16)]), [-653330422]),
    ("time", pa.array([dt.time(22, 31, 8)], pa.time64("us")), [-662762989]),
    (
        "timestamp",
        pa.array([dt.datetime(2017, 11, 16, 22, 31, 8), dt.datetime(2017, 11, 16, 22, 31, 8, 1)]),
        [-2047944441, -1207196810],
    ),
    (
        "timestamptz",
        pa.array(
            [
                dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=PST),
                dt.datetime(2017, 11, 16, 14, 31, 8, 1, tzinfo=PST),
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        [-2047944441, -1207196810],
    ),
    (
        "timestamp_ns",
        pa.array([1510871468000000000, 1510871468000001001], pa.timestamp("ns")),
        [-2047944441, -1207196810],
    ),
    (
        "timestamptz_ns",
        pa.array([1510871468000000000, 1510871468000001001], pa.timestamp("ns", tz="UTC")),
        [-2047944441, -1207196810],
    ),
    ("string", pa.array(["iceberg"]), [1210000089]),
    ("string", pa.array(["iceberg"], pa.large_string()), [1210000089]),
    (
        "uuid",
        pa.array([uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes], pa.binary(16)),
        [1488055340],
    ),
    ("fixed[4]", pa.array([b"\x00\x01\x02\x03"], pa.binary(4)), [-188683207]),
    ("binary", pa.array([b"\x00\x01\x02\x03"]), [-188683207]),
    ("binary", pa.array([b"\x00\x01\x02\x03"], pa.large_binary()), [-188683207]),
    # "not currently valid" types, hashed per the spec's table all the same
    ("boolean", pa.array([True]), [1392991556]),
    ("float", pa.array([1.0, 0.0, -0.0], pa.float32()), [-142385009, 1669671676, 1669671676]),
    ("double", pa.array([1.0, 0.0, -0.0], pa.float64()), [-142385009, 1669671676, 1669671676]),
]


@pytest.mark.parametrize(("source_type", "values", "expected"), HASH_VECTORS, ids=lambda v: str(v)[:24])
def test_appendix_b_hash_vectors(
    source_type: str, values: pa.Array, expected: list[int], backend: str
) -> None:
    assert transforms.hash32(source_type, values, backend=backend).to_pylist() == expected


def test_nan_hashes_canonically(backend: str) -> None:
    quiet, other = float("nan"), -float("nan")
    got = transforms.hash32("double", pa.array([quiet, other]), backend=backend).to_pylist()
    canonical = transforms.hash32("long", pa.array([0x7FF8000000000000]), backend=backend).to_pylist()[0]
    assert got == [canonical, canonical]


@pytest.mark.parametrize(
    ("transform", "source_type", "values", "expected"),
    [
        ("truncate[10]", "int", pa.array([1, -1], pa.int32()), [0, -10]),
        ("truncate[10]", "long", pa.array([1, -1], pa.int64()), [0, -10]),
        (
            "truncate[50]",
            "decimal(4, 2)",
            pa.array([Decimal("10.65")], pa.decimal128(4, 2)),
            [Decimal("10.50")],
        ),
        ("truncate[3]", "string", pa.array(["iceberg"]), ["ice"]),
        ("truncate[3]", "binary", pa.array([b"\x01\x02\x03\x04\x05"]), [b"\x01\x02\x03"]),
        ("bucket[16]", "long", pa.array([34, None]), [2017239379 % 16, None]),
        ("year", "date", pa.array([dt.date(2017, 11, 16), dt.date(1969, 12, 31)]), [47, -1]),
        ("month", "date", pa.array([dt.date(2017, 11, 16), dt.date(1969, 12, 31)]), [574, -1]),
        ("day", "date", pa.array([dt.date(1969, 12, 31)]), [dt.date(1969, 12, 31)]),
        (
            "hour",
            "timestamp",
            pa.array([dt.datetime(1970, 1, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, 999999)]),
            [1, -1],
        ),
        (
            "day",
            "timestamp_ns",
            pa.array([-1, 86_400 * 10**9], pa.timestamp("ns")),
            [dt.date(1969, 12, 31), dt.date(1970, 1, 2)],
        ),
        ("void", "long", pa.array([1, 2]), [None, None]),
        ("identity", "string", pa.array(["a", None]), ["a", None]),
    ],
)
def test_spec_examples(
    transform: str, source_type: str, values: pa.Array, expected: list[Any], backend: str
) -> None:
    assert transforms.apply(transform, source_type, values, backend=backend).to_pylist() == expected


def test_truncated_strings_stay_valid_utf8(backend: str) -> None:
    values = pa.array(["héllo", "😀😀😀", "ab", "", None, "日本語テキスト"])
    got = transforms.apply("truncate[2]", "string", values, backend=backend)
    got.validate(full=True)
    assert got.to_pylist() == ["hé", "😀😀", "ab", "", None, "日本"]
