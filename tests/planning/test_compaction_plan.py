"""Compaction planning (Iceberg's rewrite_data_files planner rules) on real small tables written with the
public API (SQLite catalog, ``tbl.append`` writing one file per call and partition, ``tbl.delete`` /
``tbl.delete_rows``), planned with ``tbl.compact(dry_run=True)`` or ``plan_compaction``.

File sizes are whatever the writer produces (about 1 KB for a few rows); thresholds that must sit
between sizes are derived from the files written, never hard-coded. Partition evolution uses PyIceberg's
``update_spec`` on the same SQLite catalog: an independent writer's spec change (``tbl.update_spec()`` has
tests of its own in tests/commit)."""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

import gpu_engine as ge
from gpu_engine.catalog import Catalog
from gpu_engine.errors import InvalidOption, PlanningError
from gpu_engine.expressions import TRUE
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.snapshots import SnapshotRef
from gpu_engine.planning.compaction import CompactionPlan, plan_compaction
from gpu_engine.planning.rewrite_options import RewriteOptions
from gpu_engine.table import Table
from gpu_engine.tasks import DataFile, DeleteFile, FileGroup, RewriteStrategy, ScanTask

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
CATALOG = "compaction"


def catalog_props(tmp_path: Path) -> dict[str, str]:
    return {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": f"file://{tmp_path / 'wh'}"}


def catalog(tmp_path: Path) -> Catalog:
    props = catalog_props(tmp_path)
    return ge.load_catalog(CATALOG, uri=props["uri"], warehouse=props["warehouse"])


def new_table(
    tmp_path: Path, *, version: int = 2, partitioned: bool = True, properties: dict[str, str] | None = None
) -> Table:
    cat = catalog(tmp_path)
    if not cat.namespace_exists("db"):
        cat.create_namespace("db")
    return cat.create_table(
        "db.t",
        schema=SCHEMA,
        partition_spec=["region"] if partitioned else [],
        properties={"format-version": str(version), **(properties or {})},
    )


def add(tbl: Table, ids: Sequence[int], region: str = "eu", *, branch: str = "main") -> ContentFile:
    """Append one file of rows ``ids`` in ``region``."""
    data = pa.table({"id": list(ids), "region": [region] * len(ids)}, schema=SCHEMA)
    (written,) = tbl.append(data, branch=branch).files
    return written


def plan(
    tbl: Table, options: dict[str, Any] | None = None, *, where: str | None = None, branch: str = "main"
) -> CompactionPlan:
    result = tbl.compact(options=options, where=where, branch=branch, dry_run=True)
    assert not result.groups and not result.commits  # a dry run rewrites and commits nothing
    return result.plan


def paths(files: Sequence[ContentFile] | Sequence[DataFile]) -> set[str]:
    return {f.path for f in files}


def group_paths(p: CompactionPlan) -> list[set[str]]:
    return [paths(g.files) for g in p.groups]


def in_range_target(sizes: Sequence[int]) -> int:
    """A target for which every size lies in [0.75 * target, 1.8 * target] (checked)."""
    target = max(sizes)
    assert all(int(target * 0.75) <= s <= int(target * 1.8) for s in sizes), sizes
    return target


def check_plan_invariants(p: CompactionPlan) -> None:
    """What holds of every plan: indexes in order, every file once, tasks of the group's files only,
    residual-free tasks, one partition per group."""
    assert [g.index for g in p.groups] == list(range(len(p.groups)))
    all_paths = [f.path for g in p.groups for f in g.files]
    assert len(all_paths) == len(set(all_paths))
    for g in p.groups:
        assert g.files
        assert {t.file.path for t in g.tasks} == paths(g.files)
        assert all(t.residual == TRUE for t in g.tasks)
        if g.spec_id is not None:
            assert all(f.spec_id == g.spec_id and f.partition == g.partition for f in g.files)
        assert g.max_output_file_size == p.options.write_max_file_size


# -- min-input-files and lone files ----------------------------------------------------------------------


def test_four_small_files_need_min_input_files_four(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    files = [add(tbl, range(i * 5, i * 5 + 5)) for i in range(4)]
    default = plan(tbl)
    assert default.groups == ()
    assert (default.files_considered, default.files_selected) == (4, 4)  # small, but too few
    assert "nothing to rewrite" in default.explain()

    four = plan(tbl, {"min-input-files": 4})
    check_plan_invariants(four)
    assert group_paths(four) == [paths(files)]
    (g,) = four.groups
    assert (g.spec_id, g.partition, g.output_spec_id, g.expected_output_files) == (0, (), 0, 1)
    assert g.input_bytes == sum(f.file_size_in_bytes for f in files) == four.input_bytes
    assert g.input_rows == 20


def test_five_small_files_are_rewritten_by_default(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    files = [add(tbl, range(i * 5, i * 5 + 5)) for i in range(5)]
    assert group_paths(plan(tbl)) == [paths(files)]


def test_lone_small_file_is_not_rewritten(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    add(tbl, range(5))
    for options in (None, {"min-input-files": 1}):  # a group needs two files to be worth merging
        p = plan(tbl, options)
        assert p.groups == () and (p.files_considered, p.files_selected) == (1, 1)


def test_lone_file_in_range_is_not_selected(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    f = add(tbl, range(5))
    p = plan(tbl, {"target-file-size-bytes": f.file_size_in_bytes, "min-input-files": 1})
    assert p.groups == () and (p.files_considered, p.files_selected) == (1, 0)


def test_files_in_range_are_not_selected_even_many(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    files = [add(tbl, range(i * 5, i * 5 + 5)) for i in range(6)]
    target = in_range_target([f.file_size_in_bytes for f in files])
    p = plan(tbl, {"target-file-size-bytes": target})
    assert p.groups == () and (p.files_considered, p.files_selected) == (6, 0)


def test_two_small_files_with_more_bytes_than_the_target(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    a, b = add(tbl, range(5)), add(tbl, range(5, 10))
    largest = max(a.file_size_in_bytes, b.file_size_in_bytes)
    # min (0.75 * target) above both files (small), target below their sum (enough content)
    target = largest * 3 // 2
    assert int(target * 0.75) > largest and a.file_size_in_bytes + b.file_size_in_bytes > target
    assert group_paths(plan(tbl, {"target-file-size-bytes": target})) == [paths([a, b])]
    # the same two files with a target over their sum: not enough content, too few files
    assert plan(tbl, {"target-file-size-bytes": 4 * largest}).groups == ()


# -- partitions ----------------------------------------------------------------------------------------


def test_groups_never_span_partitions(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    written: dict[str, list[ContentFile]] = {}
    for i, region in enumerate(["eu", "us", "apac", "eu", "us", "apac", "eu"]):
        written.setdefault(region, []).append(add(tbl, range(i * 10, i * 10 + 5), region))
    lone = add(tbl, range(100, 105), "mars")
    p = plan(tbl, {"min-input-files": 2})
    check_plan_invariants(p)
    assert (p.files_considered, p.files_selected) == (8, 8)
    by_partition = {g.partition: paths(g.files) for g in p.groups}
    assert by_partition == {(r,): paths(fs) for r, fs in written.items()}
    assert lone.path not in {f.path for g in p.groups for f in g.files}  # alone in its partition
    assert all(g.spec_id == 0 for g in p.groups)


def test_float_partitions_compare_by_their_bits(tmp_path: Path) -> None:
    """The spec's partition equality: all NaNs are one partition, -0.0 and 0.0 are two."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.float64())])
    cat = catalog(tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.f", schema, partition_spec=["v"])
    nan_bits = [float("nan"), float("-nan"), float("inf") * 0]  # NaNs of other bit patterns too
    files = [
        tbl.append(pa.table({"id": [i], "v": [v]}, schema=schema)).files[0] for i, v in enumerate(nan_bits)
    ]
    zeros = [
        tbl.append(pa.table({"id": [10 + i], "v": [v]}, schema=schema)).files[0]
        for i, v in enumerate([-0.0, 0.0])
    ]
    p = plan(tbl, {"min-input-files": 2})
    assert [paths(g.files) for g in p.groups] == [paths(files)]
    p = plan(tbl, {"rewrite-all": "true"})
    assert sorted(map(len, (g.files for g in p.groups))) == [1, 1, 3]
    assert {frozenset(paths(g.files)) for g in p.groups} >= {frozenset(paths([z])) for z in zeros}


def test_rewrite_all_takes_every_file_and_every_group(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    eu = add(tbl, range(5), "eu")
    us = [add(tbl, range(10, 15), "us"), add(tbl, range(15, 20), "us")]
    target = in_range_target([eu.file_size_in_bytes, *(f.file_size_in_bytes for f in us)])
    assert plan(tbl, {"target-file-size-bytes": target}).groups == ()  # nothing wrongly sized
    p = plan(tbl, {"target-file-size-bytes": target, "rewrite-all": "true"})
    check_plan_invariants(p)
    assert (p.files_considered, p.files_selected) == (3, 3)
    assert sorted(group_paths(p), key=len) == [paths([eu]), paths(us)]  # the lone file too


# -- large files -------------------------------------------------------------------------------------------


def test_large_file_alone_is_split(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    big = add(tbl, range(3000))
    size = big.file_size_in_bytes
    target = size // 3  # max 1.8 * target = 0.6 * size: the file is "large"
    p = plan(tbl, {"target-file-size-bytes": target})
    check_plan_invariants(p)
    assert group_paths(p) == [paths([big])]  # one file, but more than max-file-size-bytes
    o = p.options
    assert size > o.max_file_size_bytes
    # size = 3 * target + r with r < 3: the remainder (<= min) is spread; the average size // 3 = target
    # is below 1.1 * target: 3 files
    assert p.groups[0].expected_output_files == 3
    assert p.groups[0].max_output_file_size == int(target + (int(target * 1.8) - target) * 0.5)
    # with the file's own size as target it is in range and left alone
    assert plan(tbl, {"target-file-size-bytes": size}).groups == ()


def test_large_file_selected_next_to_small_ones(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    small = add(tbl, range(5))
    big = add(tbl, range(10, 3010))
    target = big.file_size_in_bytes // 2
    assert small.file_size_in_bytes < int(target * 0.75)
    p = plan(tbl, {"target-file-size-bytes": target, "max-file-group-size-bytes": 100 << 30})
    assert (p.files_considered, p.files_selected) == (2, 2)
    assert group_paths(p) == [paths([small, big])]


# -- deletes ----------------------------------------------------------------------------------------------


def test_delete_file_threshold(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False, version=2)
    f = add(tbl, range(20))
    tbl.delete("id = 0")
    tbl.delete("id = 1")  # two position delete files, each file-scoped: 2 / 20 rows, under the ratio
    target = f.file_size_in_bytes  # in range: only the deletes can select the file
    base = {"target-file-size-bytes": target}
    assert plan(tbl, base).files_selected == 0
    p = plan(tbl, {**base, "delete-file-threshold": 2})
    check_plan_invariants(p)
    assert (p.files_selected, group_paths(p)) == (1, [paths([f])])  # alone, despite min-input-files 5
    (g,) = p.groups
    assert len(g.delete_files) == 2 and all(d.kind == "position" for d in g.delete_files)
    assert all(len(t.deletes) == 2 for t in g.tasks)
    assert plan(tbl, {**base, "delete-file-threshold": 3}).groups == ()
    assert plan(tbl, {**base, "delete-file-threshold": 0}).files_selected == 1  # every file has >= 0


def test_delete_ratio_threshold_with_deletion_vectors(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False, version=3)
    a = add(tbl, range(10))
    b = add(tbl, range(10, 20))
    target = in_range_target([a.file_size_in_bytes, b.file_size_in_bytes])
    base = {"target-file-size-bytes": target}
    tbl.delete("id in (0, 1)")  # a DV of 2 rows: 20% of a
    assert plan(tbl, base).files_selected == 0
    low = plan(tbl, {**base, "delete-ratio-threshold": "0.2"})
    assert group_paths(low) == [paths([a])]
    tbl.delete("id = 2")  # the DV now holds 3 rows: 30% >= the default 0.3
    p = plan(tbl, base)
    check_plan_invariants(p)
    assert (p.files_selected, group_paths(p)) == (1, [paths([a])])  # a alone: b has no deletes
    (g,) = p.groups
    (dv,) = g.delete_files
    assert dv.is_deletion_vector and dv.referenced_data_file == a.path and dv.record_count == 3
    assert plan(tbl, {**base, "delete-ratio-threshold": "0.31"}).groups == ()


def test_equality_deletes_do_not_count_toward_the_ratio(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False, version=2)
    a = add(tbl, range(10))
    tbl.delete_rows(pa.table({"id": pa.array([0, 1, 2, 3, 4, 5], pa.int64())}), on=["id"])  # 60% of a
    base = {"target-file-size-bytes": a.file_size_in_bytes}
    assert plan(tbl, base).files_selected == 0  # equality deletes are not file-scoped: ratio unknown
    p = plan(tbl, {**base, "delete-file-threshold": 1})
    (g,) = p.groups
    assert paths(g.files) == paths([a]) and [d.kind for d in g.delete_files] == ["equality"]


def test_shared_position_delete_file_listed_once_per_group(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, version=2)
    a, b = add(tbl, range(10), "eu"), add(tbl, range(10, 20), "eu")
    tbl.delete("id in (0, 10)")  # one position delete file for the partition, covering a and b
    p = plan(tbl, {"min-input-files": 2})
    (g,) = p.groups
    assert paths(g.files) == paths([a, b])
    assert sum(len(t.deletes) for t in g.tasks) == 2
    (d,) = g.delete_files
    assert d.referenced_data_file is None  # two data files: not file-scoped, so no ratio either


def test_file_group_delete_files_dedup_by_path_and_offset() -> None:
    data = [DataFile(f"/wh/d{i}.parquet", "PARQUET", 0, (), 10, 1000, 1, first_row_id=None) for i in range(3)]
    dv0 = DeleteFile("/wh/dv.puffin", "PUFFIN", 1, 0, (), 2, 500, 2, (), data[0].path, 4, 40)
    dv1 = DeleteFile("/wh/dv.puffin", "PUFFIN", 1, 0, (), 3, 500, 2, (), data[1].path, 44, 40)
    pos = DeleteFile("/wh/pos.parquet", "PARQUET", 1, 0, (), 2, 300, 2)
    tasks = (
        ScanTask(data[0], 0, 1000, (pos, dv0), TRUE, 10),
        ScanTask(data[1], 0, 1000, (dv1, pos), TRUE, 10),
        ScanTask(data[2], 0, 500, (pos,), TRUE, 5),
        ScanTask(data[2], 500, 500, (pos,), TRUE, 5),
    )
    g = FileGroup(0, 0, (), tuple(data), tasks, 0, 1, 1000, 1000)
    assert g.delete_files == (pos, dv0, dv1)  # once each, first-seen order; DVs of one Puffin file kept
    assert (g.input_bytes, g.input_rows) == (3000, 30)
    assert "deletes=3" in repr(g)


# -- max-file-group-size-bytes, max-files-to-rewrite, rewrite-job-order ------------------------------------


def test_max_file_group_size_splits_a_partition(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    files = [add(tbl, range(i * 5, i * 5 + 5)) for i in range(6)]
    sizes = [f.file_size_in_bytes for f in files]
    group_max = 2 * max(sizes)
    assert 3 * min(sizes) > group_max  # exactly two files per group
    p = plan(tbl, {"max-file-group-size-bytes": group_max, "min-input-files": 2})
    check_plan_invariants(p)
    assert [len(g.files) for g in p.groups] == [2, 2, 2]
    assert all(g.input_bytes <= group_max for g in p.groups)
    assert set().union(*group_paths(p)) == paths(files)
    # groups of two small files are still too few for the default min-input-files
    assert plan(tbl, {"max-file-group-size-bytes": group_max}).groups == ()


def test_group_max_below_the_file_size_leaves_lone_files(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    files = [add(tbl, range(i * 5, i * 5 + 5)) for i in range(6)]
    group_max = min(f.file_size_in_bytes for f in files) - 1
    p = plan(tbl, {"max-file-group-size-bytes": group_max, "min-input-files": 1})
    assert p.files_selected == 6 and p.groups == ()  # each file alone: nothing to merge, none too large


def test_max_files_to_rewrite_cuts_the_last_group(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    for i in range(3):
        add(tbl, range(i * 5, i * 5 + 5), "eu")
        add(tbl, range(100 + i * 5, 105 + i * 5), "us")
    full = plan(tbl, {"min-input-files": 2})
    assert [len(g.files) for g in full.groups] == [3, 3]
    cut = plan(tbl, {"min-input-files": 2, "max-files-to-rewrite": 4})
    check_plan_invariants(cut)
    assert [len(g.files) for g in cut.groups] == [3, 1]
    assert cut.files == 4
    assert cut.groups[0].files == full.groups[0].files
    assert cut.groups[1].files == full.groups[1].files[:1]
    assert cut.groups[1].input_bytes == full.groups[1].files[0].file_size_in_bytes
    assert cut.files_selected == full.files_selected == 6  # selection counts files before the cut
    only = plan(tbl, {"min-input-files": 2, "max-files-to-rewrite": 3})
    assert [g.files for g in only.groups] == [full.groups[0].files]
    for enough in (6, 100):
        assert plan(tbl, {"min-input-files": 2, "max-files-to-rewrite": enough}).groups == full.groups


@pytest.fixture
def three_partitions(tmp_path: Path) -> Table:
    """eu: 2 files of 1500 rows (most bytes, fewest files); apac: 4 files of 1 row; us: 3 files of 1 row."""
    tbl = new_table(tmp_path)
    add(tbl, range(1500), "eu")
    for i in range(3):
        add(tbl, [10_000 + i], "us")
    add(tbl, range(2000, 3500), "eu")
    for i in range(4):
        add(tbl, [20_000 + i], "apac")
    return tbl


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("bytes-asc", ["us", "apac", "eu"]),
        ("bytes-desc", ["eu", "apac", "us"]),
        ("files-asc", ["eu", "us", "apac"]),
        ("files-desc", ["apac", "us", "eu"]),
    ],
)
def test_rewrite_job_order(three_partitions: Table, order: str, expected: list[str]) -> None:
    options = {"min-input-files": 2, "rewrite-job-order": order}
    p = plan(three_partitions, options)
    check_plan_invariants(p)
    by_region = {g.partition[0]: g for g in p.groups}
    assert by_region["eu"].input_bytes > by_region["apac"].input_bytes > by_region["us"].input_bytes
    assert [len(by_region[r].files) for r in ("eu", "us", "apac")] == [2, 3, 4]
    assert [g.partition[0] for g in p.groups] == expected
    none = plan(three_partitions, {"min-input-files": 2})
    assert {g.partition for g in none.groups} == {g.partition for g in p.groups}


def test_planned_groups_as_json(three_partitions: Table) -> None:
    p = plan(three_partitions, {"min-input-files": 2})
    groups = p.groups_json()
    assert json.loads(json.dumps(groups)) == groups
    assert [(g["partition"], g["files"]) for g in groups] == [
        ([g.partition[0]], len(g.files)) for g in p.groups
    ]
    assert all(g["bytes"] > 0 and g["output-spec-id"] == 0 and g["spec-id"] == 0 for g in groups)


def test_job_order_then_max_files(three_partitions: Table) -> None:
    p = plan(
        three_partitions, {"min-input-files": 2, "rewrite-job-order": "files-desc", "max-files-to-rewrite": 5}
    )
    assert [(g.partition[0], len(g.files)) for g in p.groups] == [("apac", 4), ("us", 1)]


# -- output spec, where, partition evolution ---------------------------------------------------------------


def test_unknown_output_spec_id(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    add(tbl, range(5))
    with pytest.raises(InvalidOption, match=r"output-spec-id=5.*spec ids: \[0\]"):
        plan(tbl, {"output-spec-id": 5})
    assert plan(tbl, {"output-spec-id": "0"}).options.output_spec_id == 0


@pytest.mark.parametrize("version", [1, 2])
def test_an_output_spec_partitioning_by_a_dropped_column_is_refused_naming_it(
    tmp_path: Path, version: int
) -> None:
    """Its rows cannot be partitioned by a column the schema no longer has: the writer failed deep
    inside ('schema 1 has no field with id 2'), naming neither the option nor the field. A v1 table's
    current spec keeps the field as void: compacting into it is fine."""
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    data = pa.table({"id": pa.array(range(6), pa.int64()), "legacy": pa.array([i % 2 for i in range(6)])})
    tbl = cat.create_table(
        "db.t", data.schema, partition_spec=["legacy"], properties={"format-version": str(version)}
    )
    tbl.append(data)
    with tbl.update_spec() as u:
        u.remove_field("legacy")
        u.add_field("bucket(2, id)")
    with tbl.update_schema() as u:
        u.delete_column("legacy")
    with pytest.raises(InvalidOption, match=r"output-spec-id=0: partition field 'legacy' \(identity\)"):
        plan(tbl, {"output-spec-id": 0, "rewrite-all": "true"})
    result = tbl.compact(options={"rewrite-all": "true"})
    assert result.rewritten_data_files == 2
    assert sorted(cat.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == list(range(6))


def test_where_on_the_partition_column(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    eu = [add(tbl, range(5), "eu"), add(tbl, range(5, 10), "eu")]
    add(tbl, range(100, 105), "us")
    add(tbl, range(105, 110), "us")
    p = plan(tbl, {"min-input-files": 2}, where="region = 'eu'")
    check_plan_invariants(p)
    assert p.files_considered == 2 and group_paths(p) == [paths(eu)]
    assert p.where == "region = 'eu'" and "where region = 'eu'" in p.explain()


def test_where_selects_whole_files(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    eu = [add(tbl, range(5), "eu"), add(tbl, range(5, 10), "eu")]
    add(tbl, range(100, 105), "us")
    add(tbl, range(105, 110), "us")
    p = plan(tbl, {"min-input-files": 2}, where="id < 7")  # rows 7..9 of the second file do not match
    check_plan_invariants(p)  # residual TRUE: every row of the files is rewritten
    assert p.files_considered == 2 and group_paths(p) == [paths(eu)]
    assert p.groups[0].input_rows == 10
    one = plan(tbl, {"min-input-files": 1}, where="id = 3")
    assert one.files_considered == 1 and one.groups == ()


def test_partition_evolution_groups_files_of_other_specs(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    old = [add(tbl, range(5)), add(tbl, range(5, 10))]
    pyi = PyIcebergSqlCatalog(CATALOG, **catalog_props(tmp_path))
    try:
        with pyi.load_table("db.t").update_spec() as update:
            update.add_identity("region")
    finally:
        pyi.engine.dispose()
    tbl = catalog(tmp_path).load_table("db.t")
    assert sorted(tbl.metadata.specs) == [0, 1] and tbl.metadata.default_spec_id == 1
    new = [add(tbl, range(10, 15), "eu"), add(tbl, range(15, 20), "us")]
    assert all(f.spec_id == 1 for f in new)

    p = plan(tbl)  # output spec 1: the spec-0 files are rewritten together, repartitioned
    check_plan_invariants(p)
    (g,) = p.groups
    assert (g.spec_id, g.partition, g.output_spec_id) == (None, (), 1)
    assert paths(g.files) == paths(old)
    assert "files of other specs" in p.explain()

    back = plan(tbl, {"output-spec-id": 0})  # now the spec-1 files are the other spec's
    (g0,) = back.groups
    assert (g0.spec_id, g0.output_spec_id) == (None, 0) and paths(g0.files) == paths(new)


# -- branches, empty tables, the plan value -----------------------------------------------------------------


def test_plan_reads_the_branch_head(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False)
    main_files = [add(tbl, range(i * 5, i * 5 + 5)) for i in range(2)]
    branch_files = [add(tbl, range(100 + i * 5, 105 + i * 5), branch="audit") for i in range(2)]
    main = plan(tbl, {"min-input-files": 2})
    assert group_paths(main) == [paths(main_files)]
    assert main.snapshot_id == tbl.metadata.current_snapshot_id
    audit = plan(tbl, {"min-input-files": 2}, branch="audit")
    head = tbl.metadata.snapshot_for_ref("audit")
    assert (audit.branch, audit.snapshot_id) == ("audit", head.snapshot_id)
    assert audit.starting_sequence_number == head.sequence_number
    assert group_paths(audit) == [paths(main_files + branch_files)]


def test_unknown_branch_is_a_planning_error(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    with pytest.raises(PlanningError, match="'nope'"):  # even on a table without snapshots
        plan(tbl, branch="nope")
    add(tbl, range(5))
    with pytest.raises(PlanningError, match="no branch named 'nope'"):
        plan(tbl, branch="nope")


def test_tag_is_a_planning_error(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    add(tbl, range(5))
    md = tbl.metadata
    assert md.current_snapshot_id is not None
    tagged = replace(md, snapshot_refs={**md.refs, "v1": SnapshotRef(md.current_snapshot_id, "tag")})
    with pytest.raises(PlanningError, match="'v1' is a tag"):
        plan_compaction(
            tagged, tbl.io, strategy=RewriteStrategy(), options=RewriteOptions.resolve(None, {}), branch="v1"
        )


def test_empty_table_plans_nothing(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    p = plan(tbl, {"rewrite-all": True})
    assert p.groups == () and p.snapshot_id is None
    assert (p.files_considered, p.files_selected, p.files, p.input_bytes) == (0, 0, 0, 0)
    assert p.starting_sequence_number == 0
    assert "nothing to rewrite" in p.explain()


def test_plan_records_snapshot_sequence_number_and_options(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, partitioned=False, properties={"write.target-file-size-bytes": "4096"})
    for i in range(5):
        add(tbl, range(i * 5, i * 5 + 5))
    p = plan(tbl)
    snap = tbl.metadata.current_snapshot()
    assert snap is not None
    assert (p.snapshot_id, p.starting_sequence_number) == (snap.snapshot_id, snap.sequence_number)
    assert p.options == RewriteOptions.resolve(None, {"write.target-file-size-bytes": "4096"})
    assert p.options.target_file_size_bytes == 4096
    assert p.table_location == tbl.location and p.branch == "main" and str(p.strategy) == "binpack"


def test_plan_compaction_directly_matches_compact_dry_run(tmp_path: Path) -> None:
    tbl = new_table(tmp_path)
    for i in range(3):
        add(tbl, range(i * 5, i * 5 + 5), "eu")
    options = RewriteOptions.resolve({"min-input-files": 3}, tbl.properties)
    direct = plan_compaction(tbl.metadata, tbl.io, strategy=RewriteStrategy(), options=options)
    assert direct == plan(tbl, {"min-input-files": 3})
    assert len(direct.groups) == 1


def test_plan_is_picklable_and_explained(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, version=3)
    for i, region in enumerate(["eu", "us", "eu", "us"]):
        add(tbl, range(i * 10, i * 10 + 10), region)
    tbl.delete("id in (0, 10)")  # DVs attached to the tasks
    p = plan(tbl, {"min-input-files": 2})
    assert len(p.groups) == 2 and any(g.delete_files for g in p.groups)
    copy = pickle.loads(pickle.dumps(p))
    assert copy == p and copy.groups == p.groups and copy.explain() == p.explain()
    text = p.explain()
    assert p.table_location in text and "min-input-files 2" in text
    assert f"{p.files_considered} live data file(s) matched" in text
    for g in p.groups:
        line = f"group {g.index}: partition {g.partition}: {len(g.files)} file(s), {g.input_bytes} B"
        assert line in text
        assert f"{len(g.delete_files)} delete file(s) -> ~{g.expected_output_files} file(s) of spec 0" in text
