"""The public transforms API: parsing, errors naming what is wrong, chunked and device inputs."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine import Column, transforms
from gpu_engine.backend import columns
from gpu_engine.errors import InvalidType, UnsupportedTransform


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("identity", transforms.Identity()),
        ("void", transforms.Void()),
        ("bucket[16]", transforms.Bucket(16)),
        ("truncate[4]", transforms.Truncate(4)),
        (" Year ", transforms.Year()),
        ("month", transforms.Month()),
        ("day", transforms.Day()),
        ("hour", transforms.Hour()),
    ],
)
def test_parse_round_trips(text: str, expected: transforms.Transform) -> None:
    parsed = transforms.parse_transform(text)
    assert parsed == expected
    assert transforms.parse_transform(str(parsed)) == parsed


@pytest.mark.parametrize(
    "text", ["bucket[0]", "bucket[-1]", "truncate[0]", "bucket(16)", "zorder", "bucket[2147483648]"]
)
def test_bad_transform_strings(text: str) -> None:
    with pytest.raises(UnsupportedTransform, match=r"bucket|truncate|unknown partition transform"):
        transforms.parse_transform(text)


@pytest.mark.parametrize(
    ("transform", "source_type"),
    [
        ("bucket[4]", "double"),
        ("bucket[4]", "boolean"),
        ("hour", "date"),
        ("truncate[2]", "uuid"),
        ("day", "string"),
    ],
)
def test_unsupported_pairs_name_both(transform: str, source_type: str) -> None:
    with pytest.raises(UnsupportedTransform, match=re.escape(transform) + ".*" + source_type):
        transforms.apply(transform, source_type, pa.array([], pa.null()), backend="cpu")


_APPLY: Any = transforms.apply  # called with wrong types on purpose
_HASH32: Any = transforms.hash32
_ONE = pa.array([1])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: _APPLY(None, "long", _ONE), UnsupportedTransform, r"transform=None: expected"),
        (lambda: _APPLY(5, "long", _ONE), UnsupportedTransform, r"transform=5: .* not int"),
        (lambda: _APPLY("bucket[16]", None, _ONE), InvalidType, r"source_type=None: expected"),
        (lambda: _APPLY("bucket[16]", 5, _ONE), InvalidType, r"source_type=5: .* not int"),
        (lambda: _HASH32(5, _ONE), InvalidType, r"source_type=5: .* not int"),
        (lambda: _HASH32(pa.int64(), _ONE), InvalidType, r"source_type=DataType\(int64\)"),
    ],
)
def test_arguments_of_the_wrong_type_are_named(call: Any, error: type[Exception], message: str) -> None:
    """A transform or source type that is neither a string nor the engine's object is an error naming
    the argument (an AttributeError on ``can_transform`` or ``name`` before)."""
    with pytest.raises(error, match=message):
        call()


def test_mismatched_arrow_data_names_both_types() -> None:
    with pytest.raises(InvalidType, match="Arrow type string cannot be read as Iceberg type long"):
        transforms.apply("bucket[4]", "long", pa.array(["x"]), backend="cpu")
    with pytest.raises(InvalidType, match="Python type list"):
        transforms.apply("bucket[4]", "long", [1, 2], backend="cpu")


def test_narrower_integers_and_units_are_widened_safely() -> None:
    got = transforms.apply("bucket[16]", "long", pa.array([34], pa.int8()), backend="cpu")
    assert got.to_pylist() == [2017239379 % 16]
    ms = pa.array([dt.datetime(2017, 11, 16, 22, 31, 8)], pa.timestamp("ms"))
    assert transforms.hash32("timestamp", ms, backend="cpu").to_pylist() == [-2047944441]


def test_arrow_uuid_extension_arrays_hash_as_their_bytes(backend: str) -> None:
    """pyarrow's canonical ``arrow.uuid`` type (a built-in extension type) reads as Iceberg uuid."""
    raw = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes
    values = pa.array([raw, None], pa.uuid())
    assert transforms.hash32("uuid", values, backend=backend).to_pylist() == [1488055340, None]
    buckets = transforms.apply("bucket[16]", "uuid", values, backend=backend)
    assert buckets.to_pylist() == [1488055340 % 16, None]
    assert transforms.apply("identity", "uuid", values, backend=backend) is values


def test_chunked_arrays_keep_their_chunks(backend: str) -> None:
    values = pa.chunked_array([[1, 2], [], [None, 4]], pa.int64())
    got = transforms.apply("truncate[2]", "long", values, backend=backend)
    assert isinstance(got, pa.ChunkedArray)
    assert [len(c) for c in got.chunks] == [2, 0, 2]
    assert got.to_pylist() == [0, 2, None, 4]
    empty = transforms.apply("day", "timestamp", pa.chunked_array([], pa.timestamp("us")), backend=backend)
    assert empty.type == pa.date32() and len(empty) == 0


def test_result_types(backend: str) -> None:
    ts = pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us"))
    assert transforms.apply("day", "timestamp", ts, backend=backend).type == pa.date32()
    assert transforms.apply("hour", "timestamp", ts, backend=backend).type == pa.int32()
    assert transforms.apply("bucket[3]", "timestamp", ts, backend=backend).type == pa.int32()
    assert transforms.apply("void", "timestamp", ts, backend=backend).type == ts.type
    s = pa.array(["abc"], pa.string())
    assert transforms.apply("truncate[1]", "string", s, backend=backend).type == pa.string()


@pytest.mark.gpu
def test_device_columns_stay_on_the_device() -> None:
    host = pa.array(["iceberg", None, "ab"])
    col = columns.from_arrow(host).to_device()
    out = transforms.apply("truncate[3]", "string", col, backend="auto")
    assert isinstance(out, Column) and out.on_device
    assert columns.to_arrow(out).to_pylist() == ["ice", None, "ab"]
    hashed = transforms.apply("bucket[16]", "string", col)
    expected = transforms.apply("bucket[16]", "string", host, backend="cpu")
    assert hashed.on_device and columns.to_arrow(hashed).equals(expected)


@pytest.mark.gpu
def test_bare_device_arrays_in_and_out() -> None:
    import numpy as np
    from numba import cuda

    from gpu_engine.kernels.elementwise import as_host, is_device_array

    values = np.array([34, -1, 2**40], np.int64)
    out = transforms.apply("bucket[16]", "long", cuda.to_device(values))
    assert is_device_array(out)
    expected = transforms.apply("bucket[16]", "long", pa.array(values), backend="cpu")
    assert as_host(out).tolist() == expected.to_pylist()
    with pytest.raises(InvalidType, match="cannot hold Iceberg string values"):
        transforms.apply("bucket[16]", "string", cuda.to_device(values))
    with pytest.raises(InvalidType, match=r"int64 device array cannot hold Iceberg int values \(need int32"):
        transforms.apply("bucket[16]", "int", cuda.to_device(values))


@pytest.mark.gpu
def test_cupy_arrays_come_back_as_cupy() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    values = cupy.arange(-500, 500, dtype=cupy.int64)
    out = transforms.apply("truncate[7]", "long", values)
    assert isinstance(out, cupy.ndarray)
    expected = transforms.apply("truncate[7]", "long", pa.array(values.get()), backend="cpu")
    assert out.get().tolist() == expected.to_pylist()


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("transform", "source_type", "values"),
    [
        ("bucket[16]", "long", pa.array([34, None, -7], pa.int64())),
        ("truncate[3]", "string", pa.array(["iceberg", None, "😀😀😀😀"])),
        ("day", "timestamp", pa.array([0, None, -1], pa.timestamp("us"))),
        ("truncate[50]", "decimal(38, 2)", pa.array([Decimal("10.65"), None], pa.decimal128(38, 2))),
    ],
)
def test_cudf_series_in_and_out(transform: str, source_type: str, values: pa.Array) -> None:
    cudf = pytest.importorskip("cudf", reason="cuDF is not installed")
    series = cudf.Series.from_arrow(values)
    out = transforms.apply(transform, source_type, series)
    assert isinstance(out, cudf.Series)
    expected = transforms.apply(transform, source_type, values, backend="cpu")
    # as cuDF holds the CPU result (it has no date type: day's dates come back as timestamps)
    assert out.to_arrow().to_pylist() == cudf.Series.from_arrow(expected).to_arrow().to_pylist()
