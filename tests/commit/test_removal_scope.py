"""Which manifests a commit must read to remove files: judged by kind and by the partition summaries that
the manifest writer records. A manifest listing a removed file is never ruled out (property test over
every partition result type, nulls, NaN, -0.0), and manifests whose summaries exclude every removed
file are (so a compaction of one partition of a time-partitioned table reads one manifest)."""

from __future__ import annotations

import itertools
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_engine.commit import new_table_metadata
from gpu_engine.commit.removal_scope import RemovalScope
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.manifest_list import FieldSummary, ManifestFile
from gpu_engine.iceberg.manifest_write import ManifestEntry, write_manifest
from gpu_engine.iceberg.metadata import TableMetadata
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.fileio import LocalFileIO

from ._support import count_opens, sql_catalog

COLUMNS = {
    "i": it.INT, "l": it.LONG, "f": it.FLOAT, "d": it.DOUBLE, "s": it.STRING, "b": it.BINARY,
    "dt": it.DATE, "ts": it.TIMESTAMP, "dec": it.decimal(9, 2), "u": it.UUID, "flag": it.BOOLEAN,
}  # fmt: skip
SCHEMA = Schema(tuple(it.NestedField(i + 1, name, t) for i, (name, t) in enumerate(COLUMNS.items())))
SPEC = [*COLUMNS, "day(ts)", "bucket(8, s)", "truncate(2, s)", "month(dt)"]
METADATA = new_table_metadata(SCHEMA, location="/t", partition_spec=SPEC, properties={"format-version": "2"})
RESULT_TYPES = [
    f.type for f in METADATA.spec.partition_type(SCHEMA).fields if isinstance(f.type, it.PrimitiveType)
]
assert len(RESULT_TYPES) == len(SPEC)


def _value(t: it.PrimitiveType) -> st.SearchStrategy[Any]:
    by_name: dict[str, st.SearchStrategy[Any]] = {
        "int": st.integers(-(2**31), 2**31 - 1) | st.integers(-3, 3),
        "long": st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3),
        "float": st.floats(width=32) | st.sampled_from([0.0, -0.0, float("nan")]),
        "double": st.floats() | st.sampled_from([0.0, -0.0, float("inf")]),
        "string": st.text(max_size=4) | st.sampled_from(["", "a", "\U0001f600", "b\x00"]),
        "binary": st.binary(max_size=4),
        "date": st.integers(-800_000, 800_000),
        "timestamp": st.integers(-(2**50), 2**50),
        "uuid": st.uuids() | st.just(uuid.UUID(int=0)),
        "boolean": st.booleans(),
    }
    if isinstance(t, it.DecimalType):
        return st.decimals(-(10**6), 10**6, places=2, allow_nan=False, allow_infinity=False).map(
            lambda d: d.quantize(Decimal("0.01"))
        )
    return by_name[t.name]


TUPLES = st.tuples(*(st.none() | _value(t) for t in RESULT_TYPES))


def _file(n: int, partition: tuple[Any, ...]) -> ContentFile:
    return ContentFile(f"/t/data/{n}.parquet", "PARQUET", 0, partition, 1, 10)


def _manifest(tmp: Path, name: str, files: list[ContentFile], md: TableMetadata = METADATA) -> ManifestFile:
    return write_manifest(
        LocalFileIO(), str(tmp / f"{name}-{uuid.uuid4()}.avro"), format_version=2, spec=md.spec,
        schema=md.schema, content="data", snapshot_id=1, entries=[ManifestEntry.added(f) for f in files],
    )  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    manifests=st.lists(st.lists(TUPLES, min_size=1, max_size=4), min_size=1, max_size=4),
    chosen=st.lists(st.integers(0, 15), max_size=4),
    others=st.lists(TUPLES, max_size=3),
)
def test_a_manifest_listing_a_removed_file_is_never_ruled_out(
    tmp_path: Path, manifests: list[list[tuple[Any, ...]]], chosen: list[int], others: list[tuple[Any, ...]]
) -> None:
    counter = itertools.count()
    listed = [[_file(next(counter), p) for p in tuples] for tuples in manifests]
    written = [_manifest(tmp_path, str(i), files) for i, files in enumerate(listed)]
    every = [f for files in listed for f in files]
    removed = [every[i % len(every)] for i in chosen]
    # files of no manifest (removed concurrently, say) widen the scope but must not narrow it
    scope = RemovalScope.of_files(METADATA, data=[*removed, *(_file(-1, p) for p in others)])
    for files, manifest in zip(listed, written, strict=True):
        if any(f in removed for f in files):
            assert scope.may_list(METADATA, manifest), (files, removed)


def test_summaries_rule_out_manifests(tmp_path: Path) -> None:
    md = new_table_metadata(
        pa.schema([("n", pa.int64()), ("x", pa.float64()), ("s", pa.string())]),
        location="/t", partition_spec=["n", "x", "truncate(1, s)"], properties={"format-version": "2"},
    )  # fmt: skip
    low = _manifest(tmp_path, "low", [_file(0, (1, 0.5, "a")), _file(1, (5, 1.5, "c"))], md)
    high = _manifest(tmp_path, "high", [_file(2, (10, 2.0, "x"))], md)
    nulls = _manifest(tmp_path, "nulls", [_file(3, (None, float("nan"), None))], md)

    def lists(partitions: list[tuple[Any, ...]]) -> list[bool]:
        scope = RemovalScope.of_files(md, data=[_file(9, p) for p in partitions])
        return [scope.may_list(md, m) for m in (low, high, nulls)]

    assert lists([(3, 1.0, "b")]) == [True, False, False]  # inside low's ranges
    assert lists([(7, 1.0, "b")]) == [False, False, False]  # between the manifests
    assert lists([(10, 2.0, "x")]) == [False, True, False]
    assert lists([(None, float("nan"), None)]) == [False, False, True]
    assert lists([(1, float("nan"), "a")]) == [False, False, False]  # low holds no NaN, nulls no 1
    assert lists([(3, 1.0, "b"), (10, 2.0, "x")]) == [True, True, False]
    # a field at a time: neither tuple is in low or high, but each field has a value in their ranges
    assert lists([(1, 2.0, "x"), (10, 0.5, "a")]) == [True, True, False]
    # another kind or spec is never listed; a manifest without summaries always may be
    assert not RemovalScope.of_files(md, deletes=[_file(9, (1, 0.5, "a"))]).may_list(md, low)
    bare = ManifestFile(low.manifest_path, low.manifest_length, 0, partitions=None)
    assert RemovalScope.of_files(md, data=[_file(9, (7, 1.0, "b"))]).may_list(md, bare)
    unreadable = ManifestFile(
        low.manifest_path, low.manifest_length, 0,
        partitions=(FieldSummary(False, None, b"\x01", b"\x02"), *(low.partitions or ())[1:]),
    )  # fmt: skip
    assert RemovalScope.of_files(md, data=[_file(9, (3, 1.0, "b"))]).may_list(md, unreadable)
    assert low.partitions is not None
    n, x, s = low.partitions
    nan_unknown = ManifestFile(  # writers before contains_nan existed
        low.manifest_path, low.manifest_length, 0, partitions=(n, FieldSummary(False, None, *_bounds(x)), s)
    )
    assert RemovalScope.of_files(md, data=[_file(9, (1, float("nan"), "a"))]).may_list(md, nan_unknown)


def _bounds(summary: FieldSummary) -> tuple[bytes | None, bytes | None]:
    return summary.lower_bound, summary.upper_bound


def test_a_compaction_of_one_day_reads_only_that_days_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us"))])
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", schema, partition_spec=["day(ts)"], properties={"format-version": "2"}
    )
    day = 86_400_000_000
    for d in range(6):  # one manifest per append, each of one day
        for k in range(2):
            ts = pa.array([d * day + k, d * day + k + 1], pa.timestamp("us"))
            tbl.append(pa.table({"id": pa.array([10 * d + k] * 2, pa.int64()), "ts": ts}))
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    rows = sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: (r["id"], r["ts"]))
    opened = count_opens(monkeypatch)
    result = tbl.compact(options={"min-input-files": "2"}, where="ts >= '1970-01-04' and ts < '1970-01-05'")
    assert result.rewritten_data_files == 2 and result.added_data_files == 1
    manifests = {p: n for p, n in opened.items() if p.endswith(".avro") and "snap-" not in p and n}
    assert list(manifests.values()) == [2, 2]  # day 3's two manifests, read by the plan and the commit
    assert sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: (r["id"], r["ts"])) == rows
