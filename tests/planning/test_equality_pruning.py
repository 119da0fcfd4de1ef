"""Equality delete files are attached only to data files whose column metrics allow a matching key
(:mod:`gpu_engine.planning.equality_pruning`, Java's ``canContainEqDeletesForFile``), and scans stay exact."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema
from gpu_engine.planning.equality_pruning import (
    ColumnMetrics,
    RunMetrics,
    entry_metrics,
    may_match,
    prunable_types,
)
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.table import Table
from gpu_engine.tasks import EQUALITY_DELETES, DeleteFile

from ..commit._support import sql_catalog

LONG = {1: it.LONG}
M = ColumnMetrics


def test_disjoint_ranges_rule_the_delete_out() -> None:
    data = {1: M(0, 99, 0, 100, None)}
    assert not may_match(data, {1: M(100, 200, 0, 3, None)}, [1], LONG)
    assert not may_match(data, {1: M(-5, -1, 0, 3, None)}, [1], LONG)
    assert may_match(data, {1: M(99, 200, 0, 3, None)}, [1], LONG)  # touching bounds overlap
    assert may_match(data, {1: M(-5, 0, 0, 3, None)}, [1], LONG)
    assert may_match(data, {1: M(10, 20, 0, 3, None)}, [1], LONG)


def test_unknown_metrics_never_rule_out() -> None:
    data = {1: M(0, 99, 0, 100, None)}
    far = {1: M(500, 600, 0, 3, None)}
    assert may_match({}, far, [1], LONG)  # data file without metrics for the field
    assert may_match(data, {}, [1], LONG)
    assert may_match({1: M(None, 99, 0, 100, None)}, far, [1], LONG)  # a bound left out
    assert may_match(data, far, [1], {})  # a type whose bounds cannot be ordered (or a dropped field)


def test_null_keys() -> None:
    some_nulls = {1: M(0, 99, 5, 100, None)}
    null_delete = {1: M(500, 600, 1, 3, None)}
    assert may_match(some_nulls, null_delete, [1], LONG)  # null matches null, whatever the ranges
    all_null = {1: M(None, None, 100, 100, None)}
    assert not may_match(all_null, {1: M(1, 2, 0, 2, None)}, [1], LONG)
    assert may_match(all_null, {1: M(1, 2, 1, 3, None)}, [1], LONG)
    only_null_keys = {1: M(None, None, 2, 2, None)}
    assert not may_match({1: M(0, 99, 0, 100, None)}, only_null_keys, [1], LONG)
    assert may_match({1: M(0, 99, None, 100, None)}, only_null_keys, [1], LONG)  # null count unknown


def test_float_ranges_need_both_files_nan_free() -> None:
    double = {1: it.DOUBLE}
    data, far = M(0.0, 1.0, 0, 10, 0), M(5.0, 6.0, 0, 2, 0)
    assert not may_match({1: data}, {1: far}, [1], double)
    assert may_match({1: M(0.0, 1.0, 0, 10, 1)}, {1: far}, [1], double)  # NaN rows: a NaN key may match
    assert may_match({1: M(0.0, 1.0, 0, 10, None)}, {1: far}, [1], double)  # NaN count unknown
    assert may_match({1: data}, {1: M(5.0, 6.0, 0, 2, None)}, [1], double)


def test_any_disjoint_field_of_a_multi_column_key_rules_out() -> None:
    types = {1: it.LONG, 2: it.STRING}
    data = {1: M(0, 99, 0, 100, None), 2: M("eu", "us", 0, 100, None)}
    assert not may_match(data, {1: M(5, 6, 0, 2, None), 2: M("zz", "zz", 0, 2, None)}, [1, 2], types)
    assert may_match(data, {1: M(5, 6, 0, 2, None), 2: M("fr", "fr", 0, 2, None)}, [1, 2], types)


RUN_TYPES = {1: it.LONG, 2: it.STRING, 3: it.DOUBLE, 4: it.BOOLEAN, 6: it.BINARY}
_BOUNDS: dict[int, st.SearchStrategy[Any]] = {
    1: st.integers(-3, 3),
    2: st.text("abz\u00e9", max_size=2),
    3: st.floats(-2, 2, allow_nan=False),
    4: st.booleans(),
}
_COUNT = st.one_of(st.integers(0, 2), st.integers(0, 2), st.none())


@st.composite
def _metrics(draw: st.DrawFn, fid: int) -> ColumnMetrics:
    # mostly known bounds; now and then unknown, or of an unlike type
    bound = st.one_of(_BOUNDS[fid], _BOUNDS[fid], _BOUNDS[fid], st.none(), st.sampled_from(["x", 1]))
    return M(draw(bound), draw(bound), draw(_COUNT), draw(_COUNT), draw(_COUNT))


@st.composite
def _file_metrics(draw: st.DrawFn) -> dict[int, ColumnMetrics]:
    fids = draw(st.lists(st.sampled_from([1, 2, 3, 4, 5]), min_size=3, unique=True))  # 5: not prunable
    return {fid: draw(_metrics(fid if fid in _BOUNDS else 1)) for fid in fids}


@settings(max_examples=300)
@given(
    deletes=st.lists(
        st.tuples(
            st.lists(st.sampled_from([1, 2, 3, 4, 5]), min_size=1, max_size=3, unique=True), _file_metrics()
        ),
        max_size=12,
    ),
    data=_file_metrics(),
    start=st.integers(0, 12),
)
def test_a_run_judged_at_once_agrees_with_each_file_judged_alone(
    deletes: list[tuple[list[int], dict[int, ColumnMetrics]]], data: dict[int, ColumnMetrics], start: int
) -> None:
    files = [
        DeleteFile(f"/eq{i}.parquet", "PARQUET", EQUALITY_DELETES, 0, (), 1, 9, i, tuple(ids))
        for i, (ids, _) in enumerate(deletes)
    ]
    by_id = {id(f): m for f, (_, m) in zip(files, deletes, strict=True)}
    start = min(start, len(files))
    got = RunMetrics(files, by_id, RUN_TYPES).may_match(data, start).tolist()
    assert got == [may_match(data, by_id[id(f)], f.equality_ids, RUN_TYPES) for f in files[start:]]


def test_a_run_follows_each_rule() -> None:
    """The run's array judgement on one case per rule of :func:`may_match` (and the scalar agrees)."""
    cases = [  # (data metrics, delete metrics, equality ids, expected)
        ({1: M(0, 9, 0, 5, None)}, {1: M(20, 30, 0, 2, None)}, (1,), False),  # disjoint
        ({1: M(0, 9, 1, 5, None)}, {1: M(20, 30, 1, 2, None)}, (1,), True),  # null keys match null rows
        ({1: M(None, None, 5, 5, None)}, {1: M(20, 30, 0, 2, None)}, (1,), False),  # all-null data
        ({1: M(0, 9, 0, 5, None)}, {1: M(None, None, 2, 2, None)}, (1,), False),  # only null keys
        ({1: M(0, 9, None, 5, None)}, {1: M(None, None, 2, 2, None)}, (1,), True),  # nulls unknown
        ({3: M(0.0, 0.5, 0, 5, 0)}, {3: M(1.0, 2.0, 0, 2, None)}, (3,), True),  # delete's NaNs unknown
        ({3: M(0.0, 0.5, 0, 5, 1)}, {3: M(1.0, 2.0, 0, 2, 0)}, (3,), True),  # NaN rows
        ({3: M(0.0, 0.5, 0, 5, 0)}, {3: M(1.0, 2.0, 0, 2, 0)}, (3,), False),
        ({2: M("a", "b", 0, 5, None)}, {2: M(1, "z", 0, 2, None)}, (2,), True),  # unlike types
        ({2: M("a", "b", 0, 5, None)}, {2: M("c", "d", 0, 2, None)}, (2,), False),
        ({2: M("a", "b\x00", 0, 5, None)}, {2: M("b\x00", "b\x00", 0, 2, None)}, (2,), True),  # NUL ends
        ({6: M(b"\x00", b"\x01\x00", 0, 5, None)}, {6: M(b"\x01\x00", b"\x01\x00", 0, 2, None)}, (6,), True),
        ({1: M(0, 9, 0, 5, None)}, {1: M(20, 30, 0, 2, None)}, (5,), True),  # not an equality field here
    ]
    files = [
        DeleteFile(f"/eq{i}.parquet", "PARQUET", EQUALITY_DELETES, 0, (), 1, 9, i, ids)
        for i, (_, _, ids, _) in enumerate(cases)
    ]
    for i, (data, delete, ids, expected) in enumerate(cases):
        by_id = {id(f): delete if j == i else {} for j, f in enumerate(files)}
        assert may_match(data, delete, ids, RUN_TYPES) is expected, cases[i]
        got = RunMetrics(files, by_id, RUN_TYPES).may_match(data, 0).tolist()
        assert got == [expected if j == i else True for j in range(len(files))], cases[i]


def test_metrics_decoded_from_manifest_maps() -> None:
    schema = Schema((it.NestedField(1, "id", it.LONG), it.NestedField(2, "u", it.UUID)))
    types = prunable_types(schema, [1, 2, 7])
    assert types == {1: it.LONG}  # uuid bounds do not order as values; field 7 is not in the schema
    maps = pa.map_(pa.int32(), pa.binary())
    counts = pa.map_(pa.int32(), pa.int64())
    entries = pa.table(
        {
            # a 4-byte bound written before an int -> long promotion, then a bound that does not decode
            "lower_bounds": pa.array([[(1, struct.pack("<i", -3))], [(1, b"\x01\x02\x03")]], maps),
            "upper_bounds": pa.array([[(1, struct.pack("<q", 2**40))], []], maps),
            "null_value_counts": pa.array([[(1, 0)], []], counts),
            "value_counts": pa.array([[(1, 10)], [(1, 4)]], counts),
            "nan_value_counts": pa.array([[], []], counts),
        }
    )
    got = entry_metrics(entries, types)
    assert got == [{1: M(-3, 2**40, 0, 10, None)}, {1: M(None, None, None, 4, None)}]


def _table(tmp_path: Path, version: int = 2) -> Table:
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    return sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": str(version)})


def _applied(tbl: Table) -> dict[str, int]:
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    return {t.file.path: sum(d.kind == "equality" for d in t.deletes) for t in plan.tasks}


@pytest.mark.parametrize("version", [2, 3])
def test_a_scan_attaches_equality_deletes_only_where_keys_may_match(tmp_path: Path, version: int) -> None:
    tbl = _table(tmp_path, version)
    for start in (0, 100, 200):
        ids = list(range(start, start + 100))
        tbl.append(pa.table({"id": pa.array(ids, pa.int64()), "region": ["eu"] * 100}))
    tbl.append(pa.table({"id": pa.array([None, 7], pa.int64()), "region": ["us", "us"]}))
    tbl.delete_rows(pa.table({"id": pa.array([150, 160], pa.int64())}), on=["id"])
    applied = sorted(_applied(tbl).values())
    assert applied == [0, 0, 0, 1]  # only the file holding 100..199
    assert plan_scan(tbl.metadata, tbl.io, ScanOptions()).summary.delete_attachments_skipped == 3
    tbl.delete_rows(pa.table({"id": pa.array([None], pa.int64())}), on=["id"])
    assert sorted(_applied(tbl).values()) == [0, 0, 1, 1]  # the null key: only the file with a null id
    assert plan_scan(tbl.metadata, tbl.io, ScanOptions()).summary.delete_attachments_skipped == 6
    got = tbl.scan().to_arrow()
    expected = [i for i in [*range(300), 7] if i not in (150, 160)]  # 7 twice; the null row deleted
    assert sorted(got.column("id").to_pylist()) == sorted(expected)
