"""Path normalisation and prefix remapping, per string and vectorised."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import InvalidOption
from gpu_engine.io.paths import PathMap, normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/tmp/x/a.parquet", "/tmp/x/a.parquet"),
        ("file:/tmp/x/a.parquet", "/tmp/x/a.parquet"),
        ("file:///tmp/x/a.parquet", "/tmp/x/a.parquet"),
        ("hdfs://localhost:20500/test-warehouse/t/a.parq", "/test-warehouse/t/a.parq"),
        ("s3://bucket/wh/t/", "/wh/t"),
        ("s3a://bucket/wh/t", "/wh/t"),
        ("/", "/"),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


MAP = PathMap.of({"hdfs://nn:8020/warehouse/db/t": "/data/t", "/warehouse/db": "/other"})
CASES = [
    ("hdfs://nn:8020/warehouse/db/t/data/a.parquet", "/data/t/data/a.parquet"),
    ("file:/warehouse/db/t/metadata/v1.json", "/data/t/metadata/v1.json"),  # longest prefix wins
    ("/warehouse/db/u/x", "/other/u/x"),
    ("/warehouse/db/t", "/data/t"),
    ("/warehouse/db/tt/x", "/other/tt/x"),  # a prefix matches whole path segments only
    ("/elsewhere/x", "/elsewhere/x"),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_apply(raw: str, expected: str) -> None:
    assert MAP.apply(raw) == expected


def test_apply_array_matches_apply() -> None:
    raw = pa.array([r for r, _ in CASES] + [None])
    assert MAP.apply_array(raw).to_pylist() == [e for _, e in CASES] + [None]


def test_relocate_and_empty_map() -> None:
    m = PathMap.relocate("file:/tmp/iceberg/t", "/fixtures/t/")
    assert m.apply("/tmp/iceberg/t/data/x.parquet") == "/fixtures/t/data/x.parquet"
    assert not PathMap() and PathMap().apply("hdfs://a/b") == "hdfs://a/b"


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ([("a", "b")], r"path_map=\[\('a', 'b'\)\]: expected a mapping .* not list"),
        (5, r"path_map=5: expected a mapping"),
        ("a=b", r"path_map='a=b': expected a mapping"),
        ({"a": 5}, r"path_map entry 'a': 5: prefixes must be strings"),
        ({5: "b"}, r"path_map entry 5: 'b': prefixes must be strings"),
    ],
)
def test_a_path_map_that_is_not_a_mapping_of_strings_is_named(mapping: object, message: str) -> None:
    """An InvalidOption naming path_map (AttributeError on .items or .rstrip before)."""
    with pytest.raises(InvalidOption, match=message):
        PathMap.of(mapping)  # type: ignore[arg-type]
