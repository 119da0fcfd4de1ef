"""The public transforms API: parsing, errors naming what is wrong, chunked and device inputs."""

from __future__ import annotations

import datetime as dt
import re

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
