"""split_by_partition against a row-by-row oracle (PyIceberg's transforms, Python grouping): which rows go
to which partition tuple, in which order, and zero-copy slices for input clustered by partition."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyiceberg.transforms import parse_transform
from pyiceberg.types import IntegerType, StringType

from gpu_engine.errors import UnsupportedFeature
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_conform import conform_batch
from gpu_engine.io.partition_split import civil_from_days, human_string, split_by_partition

F = it.NestedField
SCHEMA = Schema(
    (
        F(1, "id", it.LONG, True),
        F(2, "cat", it.STRING),
        F(3, "n", it.INT),
        F(4, "f", it.DOUBLE),
        F(5, "u", it.UUID),
        F(6, "d", it.decimal(9, 2)),
    )
)
SPEC = PartitionSpec(
    1,
    (
        PartitionField((2,), 1000, "cat", "identity"),
        PartitionField((3,), 1001, "n_bucket", "bucket[3]"),
        PartitionField((1,), 1002, "gone", "void"),
        PartitionField((4,), 1003, "f", "identity"),
    ),
)
BUCKET_3 = parse_transform("bucket[3]").transform(IntegerType())
U = [uuid.UUID(int=7), uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")]


def rows(n: int, seed: int) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    cats = ["a", "b", None, "\u00e9"]
    floats = [0.0, -0.0, math.nan, 1.5, None]
    data = pa.record_batch(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "cat": pa.array([cats[i] for i in rng.integers(0, len(cats), n)], pa.string()),
            "n": pa.array(
                [None if i % 17 == 0 else int(v) for i, v in enumerate(rng.integers(-50, 50, n))], pa.int32()
            ),
            "f": pa.array([floats[i] for i in rng.integers(0, len(floats), n)], pa.float64()),
            "u": pa.array([U[i].bytes for i in rng.integers(0, 2, n)], pa.binary(16)),
            "d": pa.array([Decimal(int(v)) / 4 for v in rng.integers(0, 3, n)], pa.decimal128(9, 2)),
        }
    )
    return conform_batch(data, SCHEMA)


def oracle_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The partition tuple of a row, row by row; floats keyed so -0.0 != 0.0 and NaN == NaN."""
    f = row["f"]
    fkey = None if f is None else ("nan",) if math.isnan(f) else (f, math.copysign(1.0, f))
    return (row["cat"], None if row["n"] is None else BUCKET_3(row["n"]), None, fkey)


def result_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    cat, b, gone, f = values
    return (cat, b, gone, None if f is None else ("nan",) if math.isnan(f) else (f, math.copysign(1.0, f)))


def expected_groups(batch: pa.RecordBatch) -> dict[tuple[Any, ...], list[int]]:
    """Row ids by partition tuple, partitions in order of first appearance."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for row in batch.to_pylist():
        out.setdefault(oracle_key(row), []).append(row["id"])
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_shuffled_rows_group_like_the_oracle(seed: int) -> None:
    batch = rows(2000, seed)
    expected = expected_groups(batch)
    got: dict[tuple[Any, ...], list[int]] = {}
    order: list[tuple[Any, ...]] = []
    for values, part in split_by_partition(batch, SCHEMA, SPEC, "cpu"):
        assert part.schema == batch.schema
        key = result_key(values)
        order.append(key)
        assert all(oracle_key(r) == key for r in part.to_pylist())
        got.setdefault(key, []).extend(part.column("id").to_pylist())
    assert got == expected  # rows keep their input order within a partition
    assert order == list(expected)  # one group per tuple, first seen first


def test_clustered_rows_are_zero_copy_slices() -> None:
    batch = rows(3000, 3)
    keys = [oracle_key(r) for r in batch.to_pylist()]
    order = sorted(range(len(keys)), key=lambda i: (str(keys[i]), i))
    clustered = batch.take(pa.array(order))
    expected = expected_groups(clustered)
    base = clustered.column("cat").buffers()[2].address
    parts = list(split_by_partition(clustered, SCHEMA, SPEC, "cpu"))
    assert [result_key(v) for v, _ in parts] == list(expected)
    assert [p.column("id").to_pylist() for _, p in parts] == list(expected.values())
    assert all(p.column("cat").buffers()[2].address == base for _, p in parts)  # slices, no copies


def test_one_partition_is_the_batch_itself() -> None:
    batch = conform_batch(pa.record_batch({"id": [1, 2, 3], "cat": ["x", "x", "x"]}), SCHEMA)
    [(values, part)] = list(split_by_partition(batch, SCHEMA, SPEC, "cpu"))
    assert values == ("x", None, None, None) and part is batch


def test_value_types_of_the_tuple() -> None:
    spec = PartitionSpec(
        0,
        (
            PartitionField((5,), 1000, "u", "identity"),
            PartitionField((6,), 1001, "d", "identity"),
            PartitionField((2,), 1002, "c", "truncate[1]"),
        ),
    )
    batch = conform_batch(
        pa.record_batch(
            {
                "id": [1, 2, 3, 4],
                "u": pa.array([U[0].bytes, U[1].bytes, U[0].bytes, None], pa.binary(16)),
                "d": pa.array([Decimal("1.50"), None, Decimal("1.50"), None], pa.decimal128(9, 2)),
                "cat": ["ab", "b", "ac", None],
            }
        ),
        SCHEMA,
    )
    parts = [(v, p.column("id").to_pylist()) for v, p in split_by_partition(batch, SCHEMA, spec, "cpu")]
    assert parts == [
        ((U[0], Decimal("1.50"), "a"), [1, 3]),
        ((U[1], None, "b"), [2]),
        ((None, None, None), [4]),
    ]
    trunc = parse_transform("truncate[1]").transform(StringType())
    assert [v[2] for v, _ in parts[:2]] == [trunc("ab"), trunc("b")]


def test_many_key_columns_with_many_values() -> None:
    """Combined ids stay dense: four long identity columns of 5000 distinct values each, every tuple
    twice and not adjacent (the sorting path)."""
    n = 5000
    schema = Schema(tuple(F(i, f"k{i}", it.LONG) for i in range(1, 5)))
    spec = PartitionSpec(0, tuple(PartitionField((i,), 999 + i, f"k{i}", "identity") for i in range(1, 5)))
    rng = np.random.default_rng(5)
    cols = {f"k{i}": pa.array(rng.permutation(n) * (2**40 + i), pa.int64()) for i in range(1, 5)}
    half = pa.table(cols)
    batch = pa.concat_tables([half, half]).combine_chunks().to_batches()[0]
    parts = list(split_by_partition(batch, schema, spec, "cpu"))
    assert [v for v, _ in parts] == [tuple(r.values()) for r in half.to_pylist()]
    assert all(p.to_pylist() == [r, r] for (_, p), r in zip(parts, half.to_pylist(), strict=True))


def test_an_identity_of_an_unknown_column_is_null() -> None:
    """v3 ``unknown`` columns are always null and not stored (the conformed batch has no such column): an
    identity partition of one is a null partition value (appends failed: the column was looked up)."""
    schema = Schema((F(1, "id", it.LONG, True), F(2, "u", it.UNKNOWN)))
    fields = (PartitionField((2,), 1000, "u", "identity"), PartitionField((1,), 1001, "b", "bucket[2]"))
    spec = PartitionSpec(0, fields)
    batch = conform_batch(pa.record_batch({"id": [1, 2, 3, 4]}), schema)
    assert batch.schema.names == ["id"]
    parts = list(split_by_partition(batch, schema, spec, "cpu"))
    assert {values[0] for values, _ in parts} == {None} and sum(p.num_rows for _, p in parts) == 4


def test_unsupported_sources() -> None:
    spec = PartitionSpec(0, (PartitionField((1, 3), 1000, "x", "bucket[2]"),))
    batch = conform_batch(pa.record_batch({"id": [1]}), SCHEMA)
    with pytest.raises(UnsupportedFeature, match="multi-argument"):
        list(split_by_partition(batch, SCHEMA, spec, "cpu"))


@given(st.integers(-719_162, 2_932_896))  # 0001-01-01 .. 9999-12-31, where Python's dates reach
def test_civil_from_days_matches_python_dates(days: int) -> None:
    d = dt.date(1970, 1, 1) + dt.timedelta(days=days)
    assert civil_from_days(days) == (d.year, d.month, d.day)


@pytest.mark.parametrize(
    ("days", "ymd"),
    [(-719_163, (0, 12, 31)), (-719_528, (0, 1, 1)), (-719_529, (-1, 12, 31)), (2_932_897, (10000, 1, 1))],
)
def test_civil_from_days_beyond_python_dates(days: int, ymd: tuple[int, int, int]) -> None:
    assert civil_from_days(days) == ymd  # year 0 is a leap year (proleptic Gregorian, as java.time)


@pytest.mark.parametrize(
    ("value", "single", "java"),
    [
        (5e-324, False, "4.9E-324"),  # Double.MIN_VALUE
        (-5e-324, False, "-4.9E-324"),
        (1.401298464324817e-45, True, "1.4E-45"),  # Float.MIN_VALUE
        (2.5e-323, False, "2.5E-323"),
        (2e-323, False, "2.0E-323"),
        (1e-5, False, "1.0E-5"),
        (1e300, False, "1.0E300"),
        (1e23, False, "1.0E23"),
        (0.001, False, "0.001"),
        (1234567.5, False, "1234567.5"),
        (1e7, False, "1.0E7"),
        (float("nan"), False, "NaN"),
        (float("-inf"), True, "-Infinity"),
    ],
)
def test_float_partition_values_are_spelled_as_java_spells_them(
    value: float, single: bool, java: str
) -> None:
    """Java's Double/Float.toString: where the shortest decimal has one digit it prints the closer of the
    one- and two-digit decimals (``Double.MIN_VALUE`` is ``4.9E-324``; ``5.0E-324`` was written)."""
    t = it.FLOAT if single else it.DOUBLE
    assert human_string("identity", t, value) == java
