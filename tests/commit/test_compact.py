"""Table.compact: binpack, sort and zorder over v1/v2/v3 tables with position deletes, DVs and equality
deletes. The rows (and on v3 their ``_row_id`` and ``_last_updated_sequence_number``) are unchanged, the
file count drops, file-scoped deletes are gone, the new files keep the starting sequence number, carry
exact metrics and are in the strategy's order (floats per the spec's total order), PyIceberg reads the
result; target sizes, partial progress, the spill path of a large sort, dry runs and bad options."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType

import gpu_engine as ge
from gpu_engine.commit.compact import CompactionResult
from gpu_engine.errors import DataFileError, InvalidOption, UnsupportedFeature, UnsupportedTransform
from gpu_engine.execute import group_rewrite, group_runner, rewrite_order
from gpu_engine.execute.group_rewrite import rewrite_file_group
from gpu_engine.execute.rewrite import rewrite_group
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.sorting import SortField, SortOrder
from gpu_engine.table import Table
from gpu_engine.tasks import RewriteResult

from ._compact_support import (
    REGIONS,
    assert_no_stray_data_files,
    assert_nothing_referenced_is_missing,
    assert_rows_equal,
    data_files,
    gen_rows,
    new_table,
    operation,
    parquet_files_on_disk,
    read_file,
    snapshot_entries,
)
from ._support import pyiceberg_static, sql_catalog

LINEAGE = ["_row_id", "_last_updated_sequence_number"]
REWRITE_ALL = {"rewrite-all": "true"}
SORT = "name DESC NULLS LAST, id"
INT, LONG = r"1\.\.2147483647", r"1\.\.9223372036854775807"  # the ranges of Java's int and long


# -- independent orders -------------------------------------------------------------------------------------


def _float_key(v: float) -> tuple[int, float, int]:
    """The spec's float order: -NaN < -Inf < -x < -0.0 < 0.0 < x < Inf < NaN."""
    if math.isnan(v):
        return (0, 0.0, 0) if math.copysign(1.0, v) < 0 else (2, 0.0, 0)
    return (1, v, 0 if math.copysign(1.0, v) < 0 else 1)


def _value_key(v: Any) -> Any:
    if isinstance(v, float):
        return _float_key(v)
    if isinstance(v, str):
        return v.encode("utf-8")  # unsigned bytes
    return v


def spec_sorted(rows: list[dict[str, Any]], order: list[tuple[str, bool, bool]]) -> list[dict[str, Any]]:
    """``rows`` in ``order``: (column, ascending, nulls first) items, compared as the spec says."""

    def cmp(r: dict[str, Any], s: dict[str, Any]) -> int:
        for col, asc, nulls_first in order:
            a, b = r[col], s[col]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                return (-1 if a is None else 1) * (1 if nulls_first else -1)
            ka, kb = _value_key(a), _value_key(b)
            if ka != kb:
                return (-1 if ka < kb else 1) * (1 if asc else -1)
        return 0

    return sorted(rows, key=functools.cmp_to_key(cmp))


def _bits(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as tuples with floats by their bits (NaN signs and zero signs matter)."""
    return [tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in r.values()) for r in rows]


def _zword(v: int | None) -> int:
    return 0 if v is None else (v & ((1 << 64) - 1)) ^ (1 << 63)


def morton(a: int | None, b: int | None) -> int:
    """Morton key of (a, b): the sign-flipped 64-bit words interleaved MSB first, ``a``'s bit first."""
    wa, wb = _zword(a), _zword(b)
    out = 0
    for i in range(63, -1, -1):
        out = (out << 2) | (((wa >> i) & 1) << 1) | ((wb >> i) & 1)
    return out


# -- setup ------------------------------------------------------------------------------------------------


def build(
    tmp_path: Path, version: int, *, partitioned: bool, eq: bool, appends: int = 5
) -> tuple[Table, pa.Table]:
    """A table of ``appends`` small files; on v2/v3 position deletes or DVs and, with ``eq``, equality
    deletes on ``id`` and on ``name`` (NULL included); returns the table and its expected rows."""
    _, tbl = new_table(tmp_path, version, partitioned=partitioned)
    parts = [gen_rows(i * 40, 40, seed=version) for i in range(appends)]
    for p in parts:
        tbl.append(p)
    expected = pa.concat_tables(parts)
    if version >= 2:
        gone = [3, 5, 41, 42, 43, 90, 130, 131, 200, 201, 202, 203]
        tbl.delete(f"id in ({', '.join(map(str, gone))})", backend="cpu")
        expected = expected.filter(pc.invert(pc.is_in(expected["id"], pa.array(gone, pa.int64()))))
        tbl.delete("id >= 60 and id < 70", backend="cpu")
        expected = expected.filter((pc.field("id") < 60) | (pc.field("id") >= 70))
    if eq:  # keys carry the partition column: equality deletes are partition-scoped
        hit = expected.filter(pc.is_in(expected["id"], pa.array([7, 8, 150], pa.int64())))
        keys = pa.table(
            {
                "id": pa.array([*hit["id"].to_pylist(), 999], pa.int64()),
                "region": [*hit["region"].to_pylist(), "eu"],
            }
        )
        tbl.delete_rows(keys, on=["id", "region"], backend="cpu")
        expected = expected.filter(pc.invert(pc.is_in(expected["id"], hit["id"])))
        names = pa.table(
            {"name": pa.array(["cy", None] * 3, pa.string()), "region": [r for r in REGIONS for _ in "ab"]}
        )
        tbl.delete_rows(names, on=["name", "region"], backend="cpu")
        expected = expected.filter(pc.fill_null(pc.not_equal(expected["name"], "cy"), False))
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected, context="before compaction")
    return tbl, expected


def lineage(tbl: Table) -> pa.Table:
    return tbl.scan(columns=["id", *LINEAGE], backend="cpu").to_arrow()


# -- exact metrics ----------------------------------------------------------------------------------------


def _decode(t: it.IcebergType, raw: bytes) -> Any:
    text = str(t)
    if text == "long":
        return struct.unpack("<q", raw)[0]
    if text in ("int", "date"):
        return struct.unpack("<i", raw)[0]
    if text == "double":
        return struct.unpack("<d", raw)[0]
    if text == "string":
        return raw.decode("utf-8")
    raise AssertionError(f"no decoder for {text}")


def assert_exact_metrics(tbl: Table, f: ContentFile) -> None:
    """``f``'s counts and bounds are those pyarrow computes over the file's rows."""
    data = read_file(f.path)
    assert f.record_count == data.num_rows
    assert f.file_size_in_bytes == os.path.getsize(f.path)
    for fld in tbl.schema().fields:
        col = data.column(fld.name)
        fid = fld.field_id
        assert f.value_counts[fid] == data.num_rows, fld.name
        assert f.null_value_counts[fid] == col.null_count, fld.name
        values = [v for v in col.to_pylist() if v is not None]
        if pa.types.is_floating(col.type):
            nans = sum(1 for v in values if math.isnan(v))
            assert f.nan_value_counts.get(fid, 0) == nans, fld.name
            values = [v for v in values if not math.isnan(v)]
        if not values:
            assert fid not in f.lower_bounds and fid not in f.upper_bounds, fld.name
            continue
        if isinstance(values[0], str):
            lo: Any = min(values, key=lambda s: s.encode("utf-8"))
            hi: Any = max(values, key=lambda s: s.encode("utf-8"))
        else:
            lo, hi = min(values), max(values)
        got_lo, got_hi = _decode(fld.type, f.lower_bounds[fid]), _decode(fld.type, f.upper_bounds[fid])
        assert got_lo == lo and got_hi == hi, (fld.name, got_lo, got_hi, lo, hi)
        if isinstance(lo, float) and lo == 0.0 and any(math.copysign(1, v) < 0 for v in values if v == 0):
            assert math.copysign(1.0, got_lo) < 0, f"{fld.name}: lower bound must be -0.0"
        if isinstance(hi, float) and hi == 0.0 and any(math.copysign(1, v) > 0 for v in values if v == 0):
            assert math.copysign(1.0, got_hi) > 0, f"{fld.name}: upper bound must be +0.0"


# -- the whole-table checks --------------------------------------------------------------------------------


def check_compacted(
    tbl: Table,
    expected: pa.Table,
    result: CompactionResult,
    *,
    files_before: list[str],
    lineage_before: pa.Table | None,
    pyiceberg: bool,
    file_order: Callable[[pa.Table], None] | None = None,
) -> list[ContentFile]:
    """Everything a completed rewrite-all compaction promises; returns the new data files."""
    assert not result.failures and result.commits
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected, context="after compaction")
    files_after = data_files(tbl)
    assert len(files_after) < len(files_before)
    assert not set(files_after) & set(files_before)  # rewrite-all: every file replaced
    assert result.rewritten_data_files == len(files_before)
    assert result.added_data_files == len(files_after)

    md = tbl.metadata
    (commit,) = result.commits
    snap = md.current_snapshot()
    assert snap is not None and snap.snapshot_id == commit.snapshot_id
    assert operation(snap) == "replace"
    entries = snapshot_entries(tbl)
    new = [e for e in entries if e.file.content == 0]
    assert {e.file.path for e in new} == set(files_after)
    for e in new:
        assert e.snapshot_id == commit.snapshot_id
        if md.format_version >= 2:
            assert e.sequence_number == result.plan.starting_sequence_number
            assert e.file_sequence_number == commit.sequence_number
        assert_exact_metrics(tbl, e.file)
        if file_order is not None:
            file_order(read_file(e.file.path))
    # the deletes of the replaced files are gone from the plan; equality deletes older than the
    # starting sequence number no longer apply to the new files either
    for t in tbl.scan(backend="cpu").plan().tasks:
        assert not t.deletes, [d.path for d in t.deletes]
    if md.format_version >= 2:
        # DVs and position delete files of one data file are dropped with it; a v2 position delete file
        # spanning several data files stays (dangling: it names no live file)
        assert result.removed_delete_files >= 1
        scoped = [e.file.path for e in entries if e.file.content == 1 and e.file.referenced_data_file]
        assert not scoped, scoped
        if md.format_version >= 3:
            assert not [e for e in entries if e.file.content == 1]
    if lineage_before is not None:
        assert_rows_equal(lineage(tbl), lineage_before, context="row lineage")
    if pyiceberg:
        assert_rows_equal(pyiceberg_static(tbl), expected, context="pyiceberg after compaction")
    assert_nothing_referenced_is_missing(tbl)
    assert_no_stray_data_files(tbl)
    return [e.file for e in new]


def _sorted_by_name(data: pa.Table) -> None:
    rows = data.select(["id", "name"]).to_pylist()
    assert _bits(rows) == _bits(spec_sorted(rows, [("name", False, False), ("id", True, True)]))


def _zordered(data: pa.Table) -> None:
    keys = [morton(a, b) for a, b in zip(data["a"].to_pylist(), data["b"].to_pylist(), strict=True)]
    assert keys == sorted(keys)


ORDER_CHECKS: dict[str, Callable[[pa.Table], None] | None] = {
    "binpack": None,
    "sort": _sorted_by_name,
    "zorder": _zordered,
}


LAYOUTS = [(1, "flat"), (2, "flat"), (2, "partitioned-eq"), (3, "flat"), (3, "partitioned-eq")]


@pytest.mark.parametrize(("version", "layout"), LAYOUTS, ids=[f"v{v}-{lay}" for v, lay in LAYOUTS])
@pytest.mark.parametrize("strategy", ["binpack", "sort", "zorder"])
def test_compaction_keeps_rows_and_drops_files(
    tmp_path: Path, version: int, strategy: str, layout: str
) -> None:
    partitioned = layout != "flat"
    eq = partitioned and version >= 2
    tbl, expected = build(tmp_path, version, partitioned=partitioned, eq=eq)
    files_before = data_files(tbl)
    before = lineage(tbl) if version >= 3 else None
    if version >= 3:
        assert before is not None and before["_row_id"].null_count == 0
    order = {"binpack": None, "sort": SORT, "zorder": "a, b"}[strategy]
    result = tbl.compact(strategy, sort_order=order, options=REWRITE_ALL, backend="cpu")
    assert result.plan.files == len(files_before)
    check_compacted(
        tbl, expected, result, files_before=files_before, lineage_before=before, pyiceberg=not eq,
        file_order=ORDER_CHECKS[strategy],
    )  # fmt: skip
    # the table still takes deletes and appends, and a second compaction finds nothing to do
    if version >= 2:
        tbl.delete("id < 20", backend="cpu")
        expected = expected.filter(pc.field("id") >= 20)
    tbl.append(gen_rows(1000, 10, seed=9))
    expected = pa.concat_tables([expected, gen_rows(1000, 10, seed=9)])
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected, context="after later writes")
    if version >= 3:
        ids = lineage(tbl).filter(pc.field("id") < 1000)
        assert_rows_equal(ids, before.filter(pc.field("id") >= 20), context="lineage after later writes")  # type: ignore[union-attr]
    again = tbl.compact(options={"min-input-files": "100"}, backend="cpu")
    assert not again.plan.groups and not again.commits


def test_lineage_of_rows_appended_in_several_commits(tmp_path: Path) -> None:
    """On v3 the rewrite materialises inherited ``_row_id``s and sequence numbers: appended in three
    commits, each row keeps the sequence number of its own append."""
    _, tbl = new_table(tmp_path, 3)
    for i in range(3):
        tbl.append(gen_rows(i * 10, 10))
    before = lineage(tbl)
    assert sorted(set(before["_last_updated_sequence_number"].to_pylist())) == [1, 2, 3]
    assert before["_row_id"].to_pylist() == before["id"].to_pylist()  # ids 0..29 appended in order
    tbl.compact(options=REWRITE_ALL, backend="cpu")
    assert_rows_equal(lineage(tbl), before, context="lineage")
    (f,) = data_files(tbl)
    stored = read_file(f)
    assert set(LINEAGE) <= set(stored.column_names)  # materialised in the file
    assert stored["_row_id"].null_count == 0 and stored["_last_updated_sequence_number"].null_count == 0
    assert (tbl.metadata.next_row_id or 0) >= 60  # the replace snapshot still counts its added rows


def test_group_whose_rows_are_all_deleted_is_removed(tmp_path: Path) -> None:
    _, tbl = new_table(tmp_path, 2)
    for i in range(3):
        tbl.append(gen_rows(i * 10, 10))
    tbl.delete_rows(pa.table({"id": pa.array(range(30), pa.int64())}), on=["id"], backend="cpu")
    result = tbl.compact(options=REWRITE_ALL, backend="cpu")
    (group,) = result.groups
    assert group.files_rewritten == 3 and group.files_added == 0 and group.rows == 0
    assert not data_files(tbl) and tbl.scan(backend="cpu").to_arrow().num_rows == 0
    assert operation(tbl.metadata.current_snapshot()) == "replace"
    assert_no_stray_data_files(tbl)


@pytest.mark.parametrize("version", [2, 3])
def test_compaction_of_a_branch_leaves_main_alone(tmp_path: Path, version: int) -> None:
    _, tbl = new_table(tmp_path, version)
    main_rows = [gen_rows(i * 10, 10) for i in range(3)]
    for p in main_rows:
        tbl.append(p)
    branch_rows = [gen_rows(100 + i * 10, 10) for i in range(2)]
    for p in branch_rows:
        tbl.append(p, branch="audit")
    tbl.delete("id in (1, 101, 111)", branch="audit", backend="cpu")
    main_head = tbl.metadata.current_snapshot_id
    audit = pa.concat_tables([*main_rows, *branch_rows]).filter(
        pc.invert(pc.is_in(pc.field("id"), pa.array([1, 101, 111], pa.int64())))
    )
    files_before = {t.file.path for t in tbl.scan(ref="audit").plan().tasks}
    result = tbl.compact(options=REWRITE_ALL, branch="audit", backend="cpu")
    md = tbl.metadata
    assert md.current_snapshot_id == main_head  # main did not move
    audit_head = md.snapshot_for_ref("audit")
    assert audit_head.snapshot_id == result.commits[0].snapshot_id and operation(audit_head) == "replace"
    assert result.plan.starting_sequence_number == md.snapshot_by_id(result.plan.snapshot_id).sequence_number  # type: ignore[arg-type]
    assert_rows_equal(tbl.scan(ref="audit", backend="cpu").to_arrow(), audit)
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), pa.concat_tables(main_rows))
    after = {t.file.path for t in tbl.scan(ref="audit").plan().tasks}
    assert len(after) == 1 and not after & files_before
    assert set(data_files(tbl)) < files_before  # main still reads the old files
    assert_nothing_referenced_is_missing(tbl)


@pytest.mark.parametrize("version", [2, 3])
def test_files_read_in_several_splits(tmp_path: Path, version: int) -> None:
    """Files of many row groups planned as several tasks each (with their deletes): every row is
    rewritten once, positions and row ids intact."""
    props = {
        "write.parquet.row-group-size-bytes": "800",
        "write.parquet.row-group-check-min-record-count": "10",  # small groups (100 rows by default)
        "read.split.target-size": "1500",
    }
    _, tbl = new_table(tmp_path, version, properties=props)
    parts = [gen_rows(i * 200, 200, seed=i) for i in range(3)]
    for p in parts:
        tbl.append(p)
    tbl.delete("id in (0, 150, 199, 200, 333, 599)", backend="cpu")
    expected = tbl.scan(backend="cpu").to_arrow()
    assert expected.num_rows == 594
    tasks = tbl.scan(backend="cpu").plan().tasks
    assert len(tasks) > 2 * len({t.file.path for t in tasks})  # several splits per file
    before = lineage(tbl) if version >= 3 else None
    result = tbl.compact("sort", sort_order="id", options=REWRITE_ALL, backend="cpu")
    assert result.groups[0].rows == 594
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected)
    if before is not None:
        assert_rows_equal(lineage(tbl), before, context="lineage")
    for f in data_files(tbl):
        ids = read_file(f)["id"].to_pylist()
        assert ids == sorted(ids)


# -- sort order details -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("order", "spec"),
    [
        ("x DESC NULLS LAST, id", [("x", False, False), ("id", True, True)]),
        ("x ASC NULLS FIRST, id DESC", [("x", True, True), ("id", False, False)]),
        ("name, x DESC NULLS FIRST, id", [("name", True, True), ("x", False, True), ("id", True, True)]),
    ],
)
def test_sort_order_of_the_output_file(
    tmp_path: Path, order: str, spec: list[tuple[str, bool, bool]]
) -> None:
    _, tbl = new_table(tmp_path, 2)
    specials = pa.table(
        {
            "id": pa.array(range(500, 512), pa.int64()),
            "name": ["b", None, "a", "a", "é", "z", None, "b", "a", "b", "c", "c"],
            "x": pa.array(
                [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, None, 1.5, -1.5, -0.0, 0.0, math.nan],
                pa.float64(),
            ),
            "a": pa.array([1] * 12, pa.int32()),
            "b": pa.array([None] * 12, pa.int64()),
            "region": ["eu"] * 12,
        },
        schema=gen_rows(0, 0).schema,
    )
    parts = [gen_rows(0, 50, seed=3), specials, gen_rows(50, 50, seed=4)]
    for p in parts:
        tbl.append(p)
    raw = pa.concat_tables(parts)
    signs = [math.copysign(1, v) for v in raw["x"].to_pylist() if v is not None and math.isnan(v)]
    assert -1.0 in signs and 1.0 in signs  # both NaN signs reached the files
    tbl.compact("sort", sort_order=order, options=REWRITE_ALL, backend="cpu")
    (f,) = data_files(tbl)
    got = read_file(f).select(["id", "name", "x"]).to_pylist()
    want = spec_sorted(raw.select(["id", "name", "x"]).to_pylist(), spec)
    assert _bits(got) == _bits(want)


def test_zorder_clusters_both_columns(tmp_path: Path) -> None:
    """Z-order over (a, b): every output file is in Morton order, and the table is read back intact."""
    _, tbl = new_table(tmp_path, 2)
    parts = [gen_rows(i * 100, 100, seed=i) for i in range(4)]
    for p in parts:
        tbl.append(p)
    # the sort strategy with a zorder(...) order is a zorder, as Java's rewrite_data_files reads it
    result = tbl.compact("sort", sort_order=" ZORDER(a, b)", options=REWRITE_ALL, backend="cpu")
    assert str(result.plan.strategy) == "zorder(a, b)"
    (f,) = data_files(tbl)
    _zordered(read_file(f))
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), pa.concat_tables(parts))
    with pytest.raises(
        UnsupportedTransform, match="sort_order field 1: the schema has no column with field id 99"
    ):
        tbl.compact("sort", sort_order=SortOrder(1, (SortField((99,), "identity", "asc", "nulls-first"),)))


# -- sizes, partial progress, spill --------------------------------------------------------------------------


def _big_table(tmp_path: Path, version: int = 2, *, appends: int = 8, n: int = 400) -> tuple[Table, pa.Table]:
    _, tbl = new_table(tmp_path, version)
    parts = [gen_rows(i * n, n, seed=i) for i in range(appends)]
    for p in parts:
        tbl.append(p)
    return tbl, pa.concat_tables(parts)


def test_a_group_past_the_target_settles_in_one_compaction(tmp_path: Path) -> None:
    """A group of about 1.4 targets is written as a target-sized file and the remainder (Java's split
    size), not as two files of 0.7 each: those would both be under min-file-size, so every later
    compaction would rewrite them again."""
    tbl, expected = _big_table(tmp_path, appends=3)
    total = sum(os.path.getsize(f) for f in data_files(tbl))
    options = {"target-file-size-bytes": str(int(total / 1.4))}
    result = tbl.compact(options=options, backend="cpu")
    (group,) = result.plan.groups
    assert group.expected_output_files == 2 and result.added_data_files == 2
    counts = sorted(e.file.record_count for e in snapshot_entries(tbl) if e.file.content == 0)
    assert len(counts) == 2 and counts[1] > 2 * counts[0], counts  # about 1 : 0.4
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected)
    assert not tbl.compact(options=options, dry_run=True).plan.groups


@pytest.mark.parametrize("target_fraction", [1.2, 0.3])
def test_overlapping_stacked_position_deletes_do_not_split_the_output(
    tmp_path: Path, target_fraction: float
) -> None:
    """Two deletes of overlapping rows committed concurrently stack as two position delete files whose
    counts add up to more rows than the file has: the live-row estimate must not drop to nothing (it made
    one output file per row). The file count stays the planned one."""
    tbl, expected = _big_table(tmp_path, appends=1, n=1000)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    first: list[int] = []

    def race(stage: str) -> None:
        if stage == "manifest-list" and not first:
            first.append(1)
            other.delete("id < 600", backend="cpu")

    tbl.delete("id < 700", backend="cpu", faults=race)
    tbl.refresh()
    counts = [f["record_count"] for f in tbl.inspect.delete_files().to_pylist()]
    assert sorted(counts) == [600, 700]
    total = sum(os.path.getsize(f) for f in data_files(tbl))
    options = {**REWRITE_ALL, "target-file-size-bytes": str(int(total * target_fraction))}
    result = tbl.compact(options=options, backend="cpu")
    (group,) = result.plan.groups
    assert 1 <= result.added_data_files <= group.expected_output_files
    assert_rows_equal(
        tbl.scan(backend="cpu").to_arrow(), expected.filter(pc.greater_equal(expected["id"], 700))
    )


@pytest.mark.parametrize("deletes", ["none", "file-scoped", "equality", "spanning"])
@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_small_target_gives_several_similar_files(tmp_path: Path, strategy: str, deletes: str) -> None:
    """A target of a quarter of the table: several files of about equal size. Deletes the planner cannot
    count (equality deletes, a v2 position delete file spanning files) leave fewer rows than expected: a
    remainder that small joins the file before it instead of making a tiny file."""
    tbl, expected = _big_table(tmp_path, 3 if deletes == "file-scoped" else 2)
    kept = 1300  # "spanning" keeps one row of the file of ids 1200..1599, so that it stays
    span = {"none": range(0), "file-scoped": range(1000, 1150), "equality": range(0, 790)}
    gone = [i for i in span.get(deletes, range(1000, 1790)) if deletes != "spanning" or i != kept]
    if deletes == "file-scoped":
        tbl.delete("id >= 1000 and id < 1150", backend="cpu")
    if deletes == "spanning":  # one position delete file for three data files
        tbl.delete(f"id >= 1000 and id < 1790 and id != {kept}", backend="cpu")
    if deletes == "equality":
        tbl.delete_rows(pa.table({"id": pa.array(gone, pa.int64())}), on=["id"], backend="cpu")
    expected = expected.filter(pc.invert(pc.is_in(expected["id"], pa.array(gone, pa.int64()))))
    total = sum(os.path.getsize(f) for f in data_files(tbl))
    target = total // 4
    order = SORT if strategy == "sort" else None
    options = {**REWRITE_ALL, "target-file-size-bytes": str(target)}
    result = tbl.compact(strategy, sort_order=order, options=options, backend="cpu")
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected)
    (group,) = result.plan.groups
    new = [e.file for e in snapshot_entries(tbl) if e.file.content == 0]
    counts = sorted(f.record_count for f in new)
    sizes = sorted(f.file_size_in_bytes for f in new)
    assert len(new) >= 2 and len(new) <= group.expected_output_files, counts
    assert sizes[-1] <= result.plan.options.max_file_size_bytes, sizes
    if deletes in ("none", "file-scoped") and strategy == "sort":  # cut by rows: equal files
        assert counts[-1] - counts[0] < len(new), counts  # ceil(rows / files) each, the rest last
    elif deletes in ("none", "file-scoped"):  # cut by the input bytes of each row's file: about equal,
        deleted = len(gone)  # the rows a file-scoped delete removed still count (Java's byte ranges)
        assert counts[-1] - counts[0] <= deleted + counts[-1] // 50, counts
    else:  # no tiny tail: the remainder joined the last full file
        assert counts[0] >= counts[-1] // 2 and sizes[0] >= sizes[-1] // 2, (counts, sizes)
    if strategy == "sort":  # each file sorted, the files in sequence
        for f in new:
            _sorted_by_name(read_file(f.path))


@pytest.mark.parametrize("parquet_io", ["pyarrow", "arrow-frames"])
def test_files_of_different_compression_are_cut_by_their_input_bytes(tmp_path: Path, parquet_io: str) -> None:
    """Ten files of rows that compress to almost nothing, then ten of random text: the output files hold a
    split of input bytes each, as Java's byte-range splits do, so every file but the last is at least
    three quarters of the target and as many are written as planned (cut by the group's average row
    before: up to eight files of a few kilobytes beside files one and a half times the target);
    compacting again finds nothing to rewrite."""
    target = 1 << 18
    rng = np.random.default_rng(0)
    n = 100_000
    data = pa.table(
        {
            "id": pa.array(range(2 * n), pa.int64()),
            "i": pa.array(np.concatenate([np.zeros(n, np.int64), rng.integers(0, 2**62, n)])),
            "s": ["aaaa"] * n + [rng.bytes(16).hex() for _ in range(n)],
        }
    )
    cat, _ = new_table(tmp_path, 2)
    props = {"format-version": "2", "write.target-file-size-bytes": str(target)}
    tbl = cat.create_table("db.mixed", schema=data.schema, properties=props)
    for k in range(20):
        tbl.append(data.slice(k * 10_000, 10_000))
    before = tbl.scan().to_arrow()
    result = tbl.compact(options=REWRITE_ALL, backend="cpu", parquet_io=parquet_io)
    (group,) = result.plan.groups
    assert result.groups[0].parquet_io == ("arrow" if parquet_io == "arrow-frames" else "pyarrow")
    new = [e.file for e in snapshot_entries(tbl) if e.file.content == 0]
    sizes = sorted(f.file_size_in_bytes for f in new)
    small = [size for size in sizes if size < 0.75 * target]
    if parquet_io == "pyarrow":  # rolled on the bytes written
        assert len(new) == group.expected_output_files and len(small) <= 1, sizes
    else:  # a file past the maximum is written again in two (the frame writer dictionary-encodes the
        # ids the input stored plainly: they take more room), else as on the host
        assert len(new) <= group.expected_output_files + 1 and len(small) <= 2, sizes
    assert sizes[-1] <= result.plan.options.max_file_size_bytes, sizes
    assert_rows_equal(tbl.scan().to_arrow(), before)
    again = tbl.compact(backend="cpu", parquet_io=parquet_io, dry_run=True)
    assert again.plan.groups == (), again.plan.explain()


def test_partial_progress_commits_in_several_snapshots(tmp_path: Path) -> None:
    tbl, expected = build(tmp_path, 3, partitioned=True, eq=False)
    snapshots = len(tbl.metadata.snapshots)
    options = {**REWRITE_ALL, "partial-progress.enabled": "true", "partial-progress.max-commits": "3"}
    result = tbl.compact(options=options, backend="cpu")
    assert len(result.plan.groups) == 3  # one per region
    assert len(result.commits) == 3 and len({c.snapshot_id for c in result.commits}) == 3
    assert len(tbl.metadata.snapshots) == snapshots + 3
    ops = [operation(s) for s in tbl.metadata.snapshots[-3:]]
    assert ops == ["replace"] * 3
    assert sorted(g.group_index for g in result.groups) == [0, 1, 2]
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected)
    assert_rows_equal(pyiceberg_static(tbl), expected)
    assert_no_stray_data_files(tbl)


def test_partial_progress_max_commits_bounds_the_commits(tmp_path: Path) -> None:
    tbl, expected = build(tmp_path, 2, partitioned=True, eq=False)
    options = {**REWRITE_ALL, "partial-progress.enabled": "true", "partial-progress.max-commits": "2"}
    result = tbl.compact(options=options, backend="cpu")
    assert len(result.plan.groups) == 3 and len(result.commits) == 2
    assert sorted(len({g.group_index for g in result.groups if g.snapshot_id == c.snapshot_id})
                  for c in result.commits) == [1, 2]  # fmt: skip
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected)


@pytest.mark.parametrize(
    ("strategy", "budget", "max_open"),
    [("sort", 4096, None), ("zorder", 4096, None), ("sort", 300, 40), ("zorder", 300, 40)],
    ids=["sort", "zorder", "sort-many-ranges", "zorder-many-ranges"],
)
def test_sort_larger_than_the_memory_budget_spills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: str, budget: int, max_open: int | None
) -> None:
    """``rewrite_group`` with a memory budget far below the group: the rows go through spill files and
    come out as the in-memory sort would order them. With many ranges (``max_open``: at most that many
    range files open at once) the spill file is partitioned in several passes."""
    tbl, expected = _big_table(tmp_path, 3, appends=4, n=500)
    tbl.delete("id >= 100 and id < 180", backend="cpu")
    expected = expected.filter((pc.field("id") < 100) | (pc.field("id") >= 180))
    order = SORT if strategy == "sort" else "a, b"
    plan = tbl.compact(strategy, sort_order=order, options=REWRITE_ALL, dry_run=True).plan
    (group,) = plan.groups
    on_disk = parquet_files_on_disk(tbl)
    spill = tmp_path / "spill"
    spill.mkdir()

    def run(budget: int | None) -> pa.Table:
        r = rewrite_group(
            tbl.metadata, tbl.io, group, plan.strategy, backend="cpu", memory_budget_bytes=budget,
            spill_dir=str(spill),
        )  # fmt: skip
        assert r.rows_read == r.rows_written == expected.num_rows
        return pa.concat_tables([read_file(f.path) for f in r.added])

    in_memory = run(None)
    used: list[str] = []
    passes: list[int] = []
    real_mkdtemp = tempfile.mkdtemp
    real_pass = rewrite_order._partition_pass

    def spy_mkdtemp(*args: Any, **kwargs: Any) -> str:
        used.append(real_mkdtemp(*args, **kwargs))
        return used[-1]

    def spy_pass(spill: str, paths: list[str], lo: int, *args: Any) -> None:
        passes.append(len(paths))
        real_pass(spill, paths, lo, *args)

    monkeypatch.setattr("gpu_engine.execute.rewrite_order.tempfile.mkdtemp", spy_mkdtemp)
    monkeypatch.setattr(rewrite_order, "_partition_pass", spy_pass)
    if max_open is not None:
        monkeypatch.setattr(rewrite_order, "MAX_OPEN_RANGES", max_open)
    spilled = run(budget)
    monkeypatch.undo()
    assert used and all(u.startswith(str(spill)) for u in used)  # the spill path ran ...
    assert not list(spill.iterdir())  # ... and cleaned up after itself
    if max_open is None:
        assert len(passes) == 1
    else:  # more ranges than files open at once: one pass per max_open ranges
        assert passes[0] > 2 * max_open and len(passes) == -(-passes[0] // max_open)
    names = expected.column_names
    assert_rows_equal(spilled.select(names), expected)
    if strategy == "sort":  # a global sort: the very same sequence
        assert _bits(spilled.to_pylist()) == _bits(in_memory.to_pylist())
        _sorted_by_name(spilled)
    else:
        assert_rows_equal(in_memory.select(names), expected)
    for path in parquet_files_on_disk(tbl) - on_disk:  # uncommitted outputs
        os.remove(path)


# -- output spec ---------------------------------------------------------------------------------------------


def _two_spec_table(tmp_path: Path) -> tuple[Table, pa.Table]:
    """Spec 0 partitions by ``region``, spec 1 (the default) by ``bucket(4, id)`` only; two files of each."""
    _, tbl = new_table(tmp_path, 2, partitioned=True)
    parts = [gen_rows(i * 40, 40, seed=i) for i in range(4)]
    for p in parts[:2]:
        tbl.append(p)
    tbl.update_spec().remove_field("region").add_field("bucket(4, id)").commit()
    for p in parts[2:]:
        tbl.append(p)
    assert sorted(tbl.metadata.specs) == [0, 1] and tbl.metadata.default_spec_id == 1
    return tbl, pa.concat_tables(parts)


def _live_data_entries_by_fastavro(tbl: Table) -> list[tuple[int, dict[str, Any], int]]:
    """(the manifest's spec id, the data_file record, the entry's snapshot id) of each live data file of the
    current snapshot, read with fastavro; the manifest list's spec id and the manifest's own must agree."""
    snap = tbl.metadata.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    out: list[tuple[int, dict[str, Any], int]] = []
    with open(snap.manifest_list, "rb") as f:
        listed = [dict(m) for m in fastavro.reader(f) if isinstance(m, dict)]
    for m in listed:
        if m["content"] != 0:
            continue
        with open(m["manifest_path"], "rb") as f:
            reader = fastavro.reader(f)
            assert reader.metadata["partition-spec-id"] == str(m["partition_spec_id"])
            entries = [dict(e) for e in reader if isinstance(e, dict)]
        for e in entries:
            if e["status"] != 2:  # a null snapshot id is inherited from the manifest (the spec)
                snapshot_id = m["added_snapshot_id"] if e["snapshot_id"] is None else e["snapshot_id"]
                out.append((m["partition_spec_id"], e["data_file"], snapshot_id))
    return out


BUCKET_4 = BucketTransform(4).transform(LongType())


@pytest.mark.parametrize("output_spec", [None, 0, 1], ids=["default", "older-spec-0", "spec-1"])
def test_output_spec_id_sets_the_spec_and_partition_of_the_new_files(
    tmp_path: Path, output_spec: int | None
) -> None:
    """Every file is rewritten into ``output-spec-id`` (default: the table's default spec 1): its manifests
    carry that spec id, its partition tuples that spec's fields, computed here from each file's rows (spec 0:
    the region; spec 1: PyIceberg's bucket of the ids)."""
    tbl, expected = _two_spec_table(tmp_path)
    before = data_files(tbl)
    options = {**REWRITE_ALL, **({} if output_spec is None else {"output-spec-id": str(output_spec)})}
    result = tbl.compact(options=options, backend="cpu")
    (commit,) = result.commits
    assert result.rewritten_data_files == len(before) == 2 * 3 + 2 * 4  # a file per partition and append
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected, context="after compaction")
    want = 1 if output_spec is None else output_spec
    live = _live_data_entries_by_fastavro(tbl)
    assert live and len(live) == result.added_data_files
    for spec_id, data_file, snapshot_id in live:
        assert (spec_id, snapshot_id) == (want, commit.snapshot_id), data_file["file_path"]
        rows = read_file(data_file["file_path"])
        if want == 0:
            values = {(r,) for r in rows["region"].to_pylist()}
        else:
            values = {(BUCKET_4(i),) for i in rows["id"].to_pylist()}
        assert len(values) == 1, (data_file["file_path"], values)  # one partition per file
        assert tuple(data_file["partition"].values()) == values.pop()
    partitions = {tuple(d["partition"].values()) for _, d, _ in live}
    if want == 0:
        assert partitions == {(r,) for r in REGIONS}
    else:
        assert partitions == {(b,) for b in range(4)}
    assert_rows_equal(pyiceberg_static(tbl), expected, context="pyiceberg after compaction")
    assert_no_stray_data_files(tbl)


# -- timings -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "parquet_io"),
    [("binpack", "pyarrow"), ("sort", "pyarrow"), ("binpack", "arrow-frames"), ("sort", "arrow-frames")],
)
def test_each_group_reports_its_read_order_and_write_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: str, parquet_io: str
) -> None:
    """Each group's ``read_seconds``, ``order_seconds`` and ``write_seconds``: none negative, together no
    more than the time its ``rewrite_file_group`` call took (measured around it here) nor than the
    compaction's wall time; a group that read and wrote files spent time on both, and a sort spent time
    ordering (a timing left at zero, or counted twice, fails); on either Parquet path."""
    tbl, _ = build(tmp_path, 2, partitioned=True, eq=False)
    calls: dict[int, float] = {}

    def timed(*args: Any, **kwargs: Any) -> RewriteResult:
        start = time.perf_counter()
        out = rewrite_file_group(*args, **kwargs)
        calls[out.group_index] = time.perf_counter() - start
        return out

    monkeypatch.setattr(group_runner, "rewrite_file_group", timed)
    start = time.perf_counter()
    result = tbl.compact(strategy, sort_order=SORT if strategy == "sort" else None, options=REWRITE_ALL,
                         backend="cpu", parquet_io=parquet_io)  # fmt: skip
    wall = time.perf_counter() - start
    assert len(result.groups) == 3 and sorted(calls) == [0, 1, 2]  # one per region
    assert {g.parquet_io for g in result.groups} == {"arrow" if parquet_io == "arrow-frames" else "pyarrow"}
    assert 0 < result.seconds <= wall
    for g in result.groups:
        timings = (g.read_seconds, g.order_seconds, g.write_seconds)
        assert all(t >= 0 for t in timings), g
        assert sum(timings) <= calls[g.group_index] <= wall, (g, calls, wall)
        assert g.files_rewritten > 0 and g.files_added > 0
        assert g.read_seconds > 0 and g.write_seconds > 0, g
        if strategy == "sort":
            assert g.order_seconds > 0, g
    assert result.to_json()["groups"][0]["read_seconds"] == result.groups[0].read_seconds


# -- dry run, options, static tables -------------------------------------------------------------------------


def test_dry_run_commits_and_writes_nothing(tmp_path: Path) -> None:
    tbl, expected = build(tmp_path, 3, partitioned=True, eq=True)
    location, files = tbl.metadata_location, set(Path(tbl.location).rglob("*"))
    result = tbl.compact("sort", sort_order=SORT, options=REWRITE_ALL, dry_run=True)
    assert result.dry_run and len(result.plan.groups) == 3 and not result.commits and not result.groups
    assert "group 0" in result.plan.explain()
    assert result.to_json()["planned-files"] == len(data_files(tbl))
    assert tbl.refresh().metadata_location == location
    assert set(Path(tbl.location).rglob("*")) == files
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), expected)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"options": {"min-input-files": "two"}}, "min-input-files"),
        ({"options": {"min-input-files": 0}}, "min-input-files"),
        ({"options": {"no-such-option": "1"}}, "no-such-option"),
        ({"options": {"partial-progress.enabled": "maybe"}}, "partial-progress.enabled"),
        ({"options": {"rewrite-job-order": "random"}}, "rewrite-job-order"),
        ({"options": {"delete-ratio-threshold": "2"}}, "delete-ratio-threshold"),
        ({"options": {"target-file-size-bytes": True}}, "target-file-size-bytes"),
        ({"options": {"target-file-size-bytes": "100", "min-file-size-bytes": "200"}}, "min-file-size-bytes"),
        ({"strategy": "hilbert"}, "hilbert"),
        ({"strategy": "sort"}, "sort order"),
        ({"strategy": "zorder"}, "zorder"),
        ({"strategy": "zorder", "sort_order": "a, a"}, "zorder columns"),
        ({"strategy": "binpack", "sort_order": "id"}, "sort_order"),
    ],
)
def test_bad_options_name_the_option(tmp_path: Path, kwargs: dict[str, Any], named: str) -> None:
    _, tbl = new_table(tmp_path, 2)
    tbl.append(gen_rows(0, 5))
    tbl.append(gen_rows(5, 5))
    location = tbl.metadata_location
    for dry_run in (True, False):
        with pytest.raises(InvalidOption, match=named.replace(".", r"\.")):
            tbl.compact(**kwargs, dry_run=dry_run)
    assert tbl.refresh().metadata_location == location


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # wrong types: bare AttributeError/TypeError, a str iterated per character, "no" taken as True
        ({"strategy": None}, "strategy=None: expected a string"),
        ({"strategy": 5}, "strategy=5: expected a string"),
        ({"strategy": "zorder", "sort_order": 5}, "sort_order=5: expected a list of names"),
        ({"strategy": "zorder", "sort_order": ["id", 5]}, "names must be strings, not 5"),
        ({"options": []}, r"options=\[\]: expected a mapping"),
        ({"options": "x=1"}, "options='x=1': expected a mapping"),
        ({"dry_run": "no"}, "dry_run='no': expected True or False"),
        # beyond what Java parses: Integer.parseInt / Long.parseLong would fail on these
        (
            {"options": {"min-input-files": str(2**31)}},
            r"min-input-files='2147483648': .* in 1\.\.2147483647",
        ),
        (
            {"options": {"max-files-to-rewrite": 2**31}},
            r"max-files-to-rewrite=2147483648: .* in 1\.\.2147483647",
        ),
        (
            {"options": {"target-file-size-bytes": str(2**63)}},
            r"target-file-size-bytes=.* in 1\.\.9223372036854775807",
        ),
    ],
)
def test_arguments_of_the_wrong_type_or_range_name_the_argument(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    """Each refused before anything is planned or committed, with the argument and its value named."""
    _, tbl = new_table(tmp_path, 2)
    tbl.append(gen_rows(0, 5))
    tbl.append(gen_rows(5, 5))
    location = tbl.metadata_location
    with pytest.raises(InvalidOption, match=message):
        tbl.compact(**{"options": {"min-input-files": "2"}, **kwargs})
    assert tbl.refresh().metadata_location == location


def test_unknown_sort_column_is_an_error_naming_it(tmp_path: Path) -> None:
    _, tbl = new_table(tmp_path, 2)
    tbl.append(gen_rows(0, 5))
    with pytest.raises(ValueError, match="nope"):
        tbl.compact("sort", sort_order="nope DESC")
    with pytest.raises(UnsupportedFeature, match="sort order=5: expected a list of names"):
        tbl.compact("sort", sort_order=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nope"):
        tbl.compact("zorder", sort_order="a, nope")


@pytest.mark.parametrize("column", ["st", "ls", "ls.element", "m.key"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_zorder_columns_that_cannot_be_ordered_are_refused_before_planning(
    tmp_path: Path, column: str, dry_run: bool
) -> None:
    """A struct, a list or a field inside a list or map: refused by each group after reading its rows (with
    partial progress, one failure a group), and not at all by a dry run."""
    cat = sql_catalog(tmp_path)
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("st", pa.struct([("x", pa.int32())])),
            ("ls", pa.list_(pa.int32())),
            ("m", pa.map_(pa.string(), pa.int32())),
        ]
    )
    tbl = cat.create_table("db.z", schema, properties={"format-version": "2"})
    for i in range(2):
        tbl.append(
            pa.Table.from_pylist([{"id": i, "st": {"x": i}, "ls": [i], "m": [("k", i)]}], schema=schema)
        )
    location = tbl.metadata_location
    with pytest.raises(UnsupportedTransform, match=f"zorder columns field 2 .*{re.escape(repr(column))}"):
        tbl.compact("zorder", sort_order=["id", column], options={"rewrite-all": "true"}, dry_run=dry_run)
    assert tbl.refresh().metadata_location == location


def test_zorder_columns_given_as_a_list_are_taken_as_named(tmp_path: Path) -> None:
    """A list was joined with ', ' and split again: a comma or blanks in a column's name named another
    column (``'a,b'`` -> ``'a'``)."""
    cat = sql_catalog(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("a,b", pa.int32()), (" sp", pa.int32())])
    tbl = cat.create_table("db.z", schema, properties={"format-version": "2"})
    for i in range(2):
        tbl.append(pa.table({"id": [3 + i, 1, 2], "a,b": [1, 2, 3], " sp": [5, 4, 6]}, schema=schema))
    result = tbl.compact("zorder", sort_order=["a,b", " sp", "id"], options={"rewrite-all": "true"})
    assert result.plan.strategy.zorder_columns == ("a,b", " sp", "id")
    for text in ("zorder(`a,b`, ` sp`, id)", "`a,b`, ` sp`, `id`"):  # quoted as Spark quotes names
        planned = tbl.compact("zorder", sort_order=text, options={"rewrite-all": "true"}, dry_run=True)
        assert planned.plan.strategy.zorder_columns == ("a,b", " sp", "id")
    with pytest.raises(UnsupportedTransform, match=r"zorder columns '`a,b, id': unclosed backtick"):
        tbl.compact("zorder", sort_order="`a,b, id")
    assert sorted(cat.load_table("db.z").scan().to_arrow()["id"].to_pylist()) == [1, 1, 2, 2, 3, 4]
    with pytest.raises(InvalidOption, match="zorder columns"):
        tbl.compact("zorder", sort_order=["id", "id"])


def test_table_loaded_from_a_metadata_file_cannot_be_compacted(tmp_path: Path) -> None:
    _, tbl = new_table(tmp_path, 2)
    for i in range(3):
        tbl.append(gen_rows(i * 5, 5))
    static = ge.load_table(tbl.metadata_location)
    assert static.catalog is None
    with pytest.raises(UnsupportedFeature, match="no catalog"):
        static.compact(options=REWRITE_ALL)
    assert len(static.compact(options=REWRITE_ALL, dry_run=True).plan.groups) == 1  # planning works
    assert len(data_files(tbl.refresh())) == 3


def test_a_dv_spelling_its_data_file_otherwise_goes_with_it(tmp_path: Path) -> None:
    """Another writer's DV names the data file ``file:/x`` where the manifest says ``/x``: it
    applies (paths compare normalized), and compaction removing the file removes the DV too (the spec:
    no DV outlives its data file; it stayed live, counted in total-delete-files)."""
    from gpu_engine.commit import SnapshotUpdate
    from gpu_engine.io.dv_write import write_deletion_vectors

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "3"})
    tbl.append(pa.table({"id": list(range(10))}, schema=schema))
    recorded = tbl.inspect.data_files().column("file_path")[0].as_py()
    other = "file:" + recorded.removeprefix("file://")  # file:/x, a spelling of neither file:///x nor /x
    assert other != recorded
    dv = write_deletion_vectors(tbl.io, tbl.location, [(other, [1, 2], (), 0)])
    tbl.commit(SnapshotUpdate("delete", added=dv))
    expected = [0, 3, 4, 5, 6, 7, 8, 9]
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == expected
    tbl.compact(options={"rewrite-all": "true"}, backend="cpu")
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == expected
    assert tbl.inspect.delete_files().num_rows == 0


@pytest.mark.parametrize("parquet_io", ["pyarrow", "arrow-frames"])
def test_v3_rewrites_keep_metrics_near_the_inferred_limit(tmp_path: Path, parquet_io: str) -> None:
    """Five primitive columns, nested ones among them, under max-inferred-column-defaults=5: every
    column keeps its bounds in appended, compacted and copy-on-write files alike (the row-lineage columns
    a v3 rewrite writes are not table columns: counted, they pushed the nested one past the limit)."""
    cat = sql_catalog(tmp_path)
    cols = {f"c{i}": pa.array([i, i + 1, i + 2], pa.int64()) for i in range(4)}
    cols["st"] = pa.array([{"x": 1}, {"x": 2}, {"x": 3}], pa.struct([("x", pa.int64())]))
    data = pa.table(cols)
    props = {"format-version": "3", "write.metadata.metrics.max-inferred-column-defaults": "5",
             "write.delete.mode": "copy-on-write"}  # fmt: skip
    tbl = cat.create_table("db.t", schema=data.schema, properties=props)
    tbl.append(data)
    tbl.append(data)
    every = {tbl.schema().ids_by_name[n] for n in ("c0", "c1", "c2", "c3", "st.x")}

    def bounded() -> list[set[int]]:
        return [set(e.file.lower_bounds) for e in snapshot_entries(tbl)]

    assert bounded() == [every, every]
    result = tbl.compact(options=REWRITE_ALL, backend="cpu", parquet_io=parquet_io)
    assert result.added_data_files == 1 and bounded() == [every]
    tbl.delete("c0 = 1", backend="cpu")
    assert bounded() == [every]


def test_a_group_whose_files_miss_rows_is_not_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files' record counts must add up to the live rows read, or the group is refused and its files
    deleted (a struct without fields once wrote no rows, and the commit replaced the rows with none)."""
    _, tbl = new_table(tmp_path, 2)
    parts = [gen_rows(i * 50, 50, seed=i) for i in range(3)]
    for p in parts:
        tbl.append(p)
    before = sorted(data_files(tbl))
    real = rewrite_group

    def one_row_short(*args: Any, **kwargs: Any) -> RewriteResult:
        result = real(*args, **kwargs)
        return dataclasses.replace(result, rows_read=result.rows_read + 1)

    monkeypatch.setattr(group_rewrite, "rewrite_group", one_row_short)
    with pytest.raises(DataFileError, match="the files written hold 150 rows where 151 live rows were read"):
        tbl.compact(options=REWRITE_ALL, backend="cpu")
    assert sorted(data_files(tbl)) == before and set(os.listdir(Path(before[0]).parent)) == {
        Path(p).name for p in before
    }
    assert_rows_equal(tbl.scan(backend="cpu").to_arrow(), pa.concat_tables(parts))
