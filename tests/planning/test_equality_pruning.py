"""Equality delete files are attached only to data files whose column metrics allow a matching key
(:mod:`gpu_engine.planning.equality_pruning`, Java's ``canContainEqDeletesForFile``), and scans stay exact."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema
from gpu_engine.planning.equality_pruning import ColumnMetrics, entry_metrics, may_match, prunable_types
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.table import Table

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
