"""The planner's API: snapshot selection, residuals, picklable tasks, splits, and bad input (missing or
truncated manifest lists and manifests give a clear error naming the file, never a partial plan)."""

from __future__ import annotations

import dataclasses
import io
import itertools
import pickle
import re
import shutil
from pathlib import Path
from typing import Any, cast

import fastavro
import pyarrow.parquet as pq
import pytest

import gpu_engine as ge
from gpu_engine.errors import ExpressionError, GpuEngineError, ManifestError, PlanningError, SnapshotNotFound
from gpu_engine.expressions import TRUE, AlwaysTrue, bind, parse
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.planning.splits import split_ranges
from gpu_engine.table import Table
from gpu_engine.tasks import DataFile, ScanPlan

from ._support import SHARED, load, manifest_files

BRANCHES = "pg_lake/sample_tables_v3/public/v3_branches_tags"
EVOLUTION = "pg_lake/sample_tables_v3/public/v3_evolution_full"
IDENTITY = "pg_lake/sample_tables_v3/public/v3_partitioned_identity"
PRODUCTS = "dremio-oss/iceberg/v2/products_with_eq_deletes"
MULTIBLOCK = "impala/iceberg_test/hadoop_catalog/ice/iceberg_lineitem_multiblock"

# v3_branches_tags: three appends, one row each; tag v1 -> first, branch audit -> second, main -> third
FIRST, SECOND, THIRD = 5354682886017325803, 7594869993017634045, 4363037235887043187


def _plan(tbl: Table, **options: object) -> ScanPlan:
    return plan_scan(tbl.metadata, tbl.io, ScanOptions(**options))  # type: ignore[arg-type]


# -- snapshot selection ----------------------------------------------------------------------------------


def test_snapshot_by_id_ref_and_time() -> None:
    tbl = load(BRANCHES)
    assert set(tbl.metadata.refs) == {"main", "audit", "v1"}
    assert tbl.metadata.refs["v1"].is_tag and tbl.metadata.refs["audit"].is_branch
    for options, sid, files in (
        ({}, THIRD, 3),
        ({"snapshot_id": FIRST}, FIRST, 1),
        ({"snapshot_id": SECOND}, SECOND, 2),
        ({"ref": "main"}, THIRD, 3),
        ({"ref": "audit"}, SECOND, 2),
        ({"ref": "v1"}, FIRST, 1),
    ):
        plan = _plan(tbl, **options)
        assert plan.summary.snapshot_id == sid, options
        assert len({t.file.path for t in plan.tasks}) == files, options


def test_as_of_follows_the_snapshot_log() -> None:
    tbl = load(BRANCHES)
    log = tbl.metadata.snapshot_log
    assert [e.snapshot_id for e in log] == [FIRST, SECOND, THIRD]
    for i, entry in enumerate(log):
        assert _plan(tbl, as_of=entry.timestamp_ms).summary.snapshot_id == entry.snapshot_id
        if i:
            assert _plan(tbl, as_of=entry.timestamp_ms - 1).summary.snapshot_id == log[i - 1].snapshot_id
    assert _plan(tbl, as_of=log[-1].timestamp_ms + 10**9).summary.snapshot_id == THIRD
    with pytest.raises(SnapshotNotFound, match=str(log[0].timestamp_ms - 1)):
        _plan(tbl, as_of=log[0].timestamp_ms - 1)


@pytest.mark.parametrize(
    "options",
    [
        {"snapshot_id": FIRST, "ref": "main"},
        {"snapshot_id": FIRST, "as_of": 1779298839350},
        {"as_of": 1779298839350, "ref": "v1"},
        {"snapshot_id": FIRST, "as_of": 1779298839350, "ref": "v1"},
    ],
)
def test_exclusive_selection_options(options: dict[str, object]) -> None:
    tbl = load(BRANCHES)
    with pytest.raises(PlanningError, match="exclusive"):
        _plan(tbl, **options)


def test_unknown_snapshot_or_ref() -> None:
    tbl = load(BRANCHES)
    with pytest.raises(SnapshotNotFound, match="12345"):
        _plan(tbl, snapshot_id=12345)
    with pytest.raises(SnapshotNotFound, match="nope"):
        _plan(tbl, ref="nope")
    assert issubclass(SnapshotNotFound, GpuEngineError)


def test_time_travel_binds_the_filter_to_the_snapshot_schema() -> None:
    """v3_evolution_full: 'payload' exists only in the first schemas; the current schema dropped it."""
    tbl = load(EVOLUTION)
    first = tbl.metadata.snapshots[0]
    assert first.schema_id == 0 and tbl.metadata.current_schema_id == 7
    plan = _plan(tbl, snapshot_id=first.snapshot_id, filter="payload is not null")
    assert plan.schema.schema_id == 0
    assert plan.tasks
    with pytest.raises(ExpressionError, match="payload"):
        _plan(tbl, filter="payload is not null")


def test_case_sensitivity_of_filter_columns() -> None:
    """iceberg_column_case_sensitivity_issue: columns 'ID', 'OWNERID'; bucket[16](ID); 2 manifests."""
    tbl = load("impala/iceberg_test/iceberg_column_case_sensitivity_issue")
    with pytest.raises(ExpressionError, match="'id'"):
        _plan(tbl, filter="id = '1'")
    insensitive = _plan(tbl, filter="id = '1'", case_sensitive=False)
    exact = _plan(tbl, filter="ID = '1'")
    assert insensitive.tasks == exact.tasks and len(exact.tasks) == 1
    assert exact.summary.manifests_pruned + exact.summary.data_files_pruned_by_partition == 1


def test_concurrent_manifest_reads_give_the_same_plan() -> None:
    tbl = load(PRODUCTS)
    serial = _plan(tbl, max_workers=1)
    assert serial.summary.manifests_total + serial.summary.delete_manifests_total == 7
    for workers in (2, 8, None):
        plan = _plan(tbl, max_workers=workers)
        assert plan.tasks == serial.tasks and plan.summary == serial.summary


def test_table_without_snapshots_plans_empty() -> None:
    tbl = load("pg_lake/sample_tables_v3/public/v3_minimal")
    plan = _plan(tbl, filter="true")
    assert plan.tasks == () and plan.summary.snapshot_id is None and plan.summary.data_files_total == 0


# -- residuals ---------------------------------------------------------------------------------------------


def _residuals(tbl: Table, row_filter: str) -> dict[str, str]:
    return {t.file.partition[0]: str(t.residual) for t in _plan(tbl, filter=row_filter).tasks}


def test_residuals_on_an_identity_partition() -> None:
    tbl = load(IDENTITY)  # identity(region): 'eu-west' ids 3, 4 and 'us-east' ids 1, 2
    schema = tbl.metadata.schema
    plan = _plan(tbl, filter="region = 'eu-west'")
    assert [t.file.partition for t in plan.tasks] == [("eu-west",)]
    assert isinstance(plan.tasks[0].residual, AlwaysTrue)
    plan = _plan(tbl, filter="region = 'eu-west' and id > 3")
    assert [t.residual for t in plan.tasks] == [bind(parse("id > 3"), schema)]
    assert _residuals(tbl, "region = 'eu-west' or id = 1") == {"eu-west": "true", "us-east": "id = 1"}
    assert _residuals(tbl, "region in ('eu-west', 'us-east')") == {"eu-west": "true", "us-east": "true"}
    assert _residuals(tbl, "region != 'ap-south'") == {"eu-west": "true", "us-east": "true"}


def test_residual_on_non_partition_columns_is_the_filter() -> None:
    tbl = load(IDENTITY)
    plan = _plan(tbl, filter="id >= 2 and id <= 3")
    assert len(plan.tasks) == 2
    assert all(t.residual == plan.filter for t in plan.tasks)
    unpartitioned = load(PRODUCTS.replace("products_with_eq_deletes", "orders"))
    assert unpartitioned.metadata.spec.fields  # identity(2): filter another column
    plan = _plan(unpartitioned, filter="order_id < 100")
    assert plan.tasks and all(t.residual == plan.filter for t in plan.tasks)
    plan = _plan(unpartitioned)
    assert all(t.residual is TRUE or isinstance(t.residual, AlwaysTrue) for t in plan.tasks)


def test_residuals_through_the_hour_transform() -> None:
    """iceberg_partitioned: hour(event_time); rows at 08:00, 09:00 and 10:00. A bound on an hour boundary
    is decided by the partition (strict projection); a bound inside an hour is not."""
    tbl = load("impala/iceberg_test/iceberg_partitioned")
    plan = _plan(tbl, filter="event_time >= '2020-01-01T09:00:00Z'")
    assert plan.tasks and all(isinstance(t.residual, AlwaysTrue) for t in plan.tasks)
    plan = _plan(tbl, filter="event_time >= '2020-01-01T08:30:00Z'")
    by_hour = {t.file.partition[0]: t.residual for t in plan.tasks}
    assert isinstance(by_hour[438297], AlwaysTrue) and isinstance(by_hour[438298], AlwaysTrue)
    assert 438296 not in by_hour  # 08:00 rows: pruned by metrics (upper bound 08:00)


# -- picklable tasks ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "row_filter"),
    [
        (PRODUCTS, "category in ('widget', 'gizmo') and product_id >= 10"),
        ("impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors", TRUE),
        (
            "pg_lake/sample_tables_v3/public/v3_partitioned_multi",
            "ts >= '2024-01-15T10:30:00Z' or id in (1, 2)",
        ),
        (
            "pg_lake/sample_tables_v3/public/v3_primitives",
            "c_dec_l < -1.5 and c_bin = X'783030' and c_date < '2000-01-01'",
        ),
    ],
)
def test_tasks_and_plans_pickle(rel: str, row_filter: object) -> None:
    tbl = load(rel)
    plan = _plan(tbl, filter=row_filter)
    assert plan.tasks
    for task in plan.tasks:
        assert pickle.loads(pickle.dumps(task)) == task
    again = pickle.loads(pickle.dumps(plan))
    assert again.tasks == plan.tasks and again.summary == plan.summary and again.filter == plan.filter
    assert repr(plan.tasks[0]).startswith("ScanTask(")


# -- splits ----------------------------------------------------------------------------------------------


def _data_file(size: int, offsets: tuple[int, ...] | None) -> DataFile:
    return DataFile("/x/f.parquet", "PARQUET", 0, (), 1000, size, 1, split_offsets=offsets)


def _check_ranges(ranges: list[tuple[int, int]], size: int, offsets: tuple[int, ...], target: int) -> None:
    assert ranges[0][0] == 0
    assert sum(length for _, length in ranges) == size
    for (start, length), (nxt, _) in itertools.pairwise(ranges):
        assert start + length == nxt and nxt in offsets  # contiguous, on row-group starts
        assert length >= target


def test_split_ranges_follow_split_offsets() -> None:
    offsets = (4, 300, 600, 900)
    ranges = split_ranges(_data_file(1000, offsets), 250)
    assert ranges == [(0, 300), (300, 300), (600, 300), (900, 100)]
    _check_ranges(ranges, 1000, offsets, 250)
    ranges = split_ranges(_data_file(1000, offsets), 500)
    assert ranges == [(0, 600), (600, 400)]
    assert split_ranges(_data_file(1000, offsets), 1000) == [(0, 1000)]  # not larger than the target
    assert split_ranges(_data_file(1000, None), 100) == [(0, 1000)]
    assert split_ranges(_data_file(1000, (4,)), 100) == [(0, 1000)]


@pytest.mark.parametrize("offsets", [(4, 600, 300), (4, 300, 1200), (4, 4, 500), (-1, 500)])
def test_unusable_split_offsets_read_the_whole_file(offsets: tuple[int, ...]) -> None:
    assert split_ranges(_data_file(1000, offsets), 100) == [(0, 1000)]


def test_plan_splits_a_multi_row_group_file() -> None:
    """iceberg_lineitem_multiblock: one 20,000-row file with 200 row groups and split_offsets."""
    tbl = load(MULTIBLOCK)
    target = 200_000
    md = dataclasses.replace(
        tbl.metadata, properties={**tbl.metadata.properties, "read.split.target-size": str(target)}
    )
    plan = plan_scan(md, tbl.io, ScanOptions())
    data = plan.tasks[0].file
    assert {t.file for t in plan.tasks} == {data}
    assert data.split_offsets is not None and len(data.split_offsets) == 200
    meta = pq.ParquetFile(data.path).metadata
    starts = {
        meta.row_group(i).column(0).dictionary_page_offset or meta.row_group(i).column(0).data_page_offset
        for i in range(meta.num_row_groups)
    }
    assert set(data.split_offsets) == starts
    ranges = [(t.start, t.length) for t in plan.tasks]
    _check_ranges(ranges, data.file_size_in_bytes, data.split_offsets, target)
    assert len(plan.tasks) == 7  # the last range also holds the ~480 KB footer (200 row groups' metadata)
    assert plan.summary.tasks == len(plan.tasks) and plan.summary.bytes_kept == data.file_size_in_bytes
    assert all(t.deletes == plan.tasks[0].deletes and t.deletes for t in plan.tasks)  # the pos delete file
    assert abs(sum(t.estimated_rows for t in plan.tasks) - data.record_count) <= data.record_count // 100
    whole = _plan(tbl)  # default target 128 MiB: one task
    assert [(t.start, t.length) for t in whole.tasks] == [(0, data.file_size_in_bytes)]


def test_malformed_split_target_property_is_a_clear_error() -> None:
    tbl = load(MULTIBLOCK)
    md = dataclasses.replace(tbl.metadata, properties={"read.split.target-size": "128MB"})
    with pytest.raises(GpuEngineError, match=r"read\.split\.target-size"):
        plan_scan(md, tbl.io, ScanOptions())


# -- bad input -------------------------------------------------------------------------------------------


@pytest.fixture
def products(tmp_path: Path) -> Table:
    """A private copy of products_with_eq_deletes (7 snapshots; data, equality and position deletes)."""
    target = tmp_path / "products_with_eq_deletes"
    shutil.copytree(SHARED / "fixtures" / PRODUCTS, target)
    tbl = ge.load_table(target, relocate=True)
    assert len(_plan(tbl).tasks) == 5  # the copy plans as the original does
    return tbl


def _current_manifests(tbl: Table, content: int) -> list[Path]:
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None
    return [Path(m.manifest_path) for m in manifest_files(tbl, snapshot) if m.content == content]


def test_missing_manifest_list(products: Table) -> None:
    snapshot = products.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    path = Path(products.io.resolve(snapshot.manifest_list))
    path.unlink()
    with pytest.raises(ManifestError, match=re.escape(path.name) + ".*not found"):
        _plan(products)
    with pytest.raises(ManifestError, match=re.escape(path.name)):
        _plan(products, filter="product_id = 1")
    # older snapshots do not need that file
    assert _plan(products, snapshot_id=products.metadata.snapshots[0].snapshot_id).tasks


@pytest.mark.parametrize("content", [0, 1], ids=["data-manifest", "delete-manifest"])
def test_missing_manifest(products: Table, content: int) -> None:
    victim = _current_manifests(products, content)[0]
    victim.unlink()
    with pytest.raises(ManifestError, match=re.escape(victim.name) + ".*not found"):
        _plan(products)


def test_missing_delete_manifest_is_not_pruned_away_silently(products: Table) -> None:
    """A filter that could prune the data must not turn a missing delete manifest into a plan without
    its deletes: either the manifest is provably irrelevant (pruned by its partition summary) or it fails."""
    for victim in _current_manifests(products, 1):
        victim.unlink()
    with pytest.raises(ManifestError):
        _plan(products, filter="category = 'widget'")


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("which", ["manifest", "manifest-list", "delete-manifest"])
def test_truncated_files(products: Table, which: str, fraction: float) -> None:
    snapshot = products.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    if which == "manifest-list":
        victim = Path(products.io.resolve(snapshot.manifest_list))
    else:
        victim = _current_manifests(products, 0 if which == "manifest" else 1)[0]
    data = victim.read_bytes()
    victim.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ManifestError, match=re.escape(victim.name)):
        _plan(products)


def test_manifest_truncated_at_a_block_boundary(products: Table) -> None:
    """Cut after the first of several Avro blocks: the file still parses, so only the entry counts of the
    manifest list reveal the loss. The plan must fail rather than drop the lost data files."""
    victim = next(
        p
        for p in _current_manifests(products, 0)
        if len(list(fastavro.reader(io.BytesIO(p.read_bytes())))) >= 3
    )
    reader = fastavro.reader(io.BytesIO(victim.read_bytes()))
    records = list(reader)
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(out, reader.writer_schema, records, metadata=meta, sync_interval=1, codec="null")
    blocks = list(fastavro.block_reader(io.BytesIO(out.getvalue())))
    assert len(blocks) >= 3
    cut = blocks[1].offset  # header + first block
    victim.write_bytes(out.getvalue()[:cut])
    assert len(list(fastavro.reader(io.BytesIO(victim.read_bytes())))) == 1
    with pytest.raises(ManifestError, match=re.escape(victim.name)):
        _plan(products)


def test_manifest_list_truncated_at_a_block_boundary(products: Table) -> None:
    """The last manifest listed is the delete manifest of the position delete (product_ids 50-52); losing
    it would bring those rows back. The summary records total-delete-files=7: the plan must not show 6."""
    snapshot = products.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None and snapshot.summary is not None
    assert snapshot.summary["total-data-files"] == "5" and snapshot.summary["total-delete-files"] == "7"
    victim = Path(products.io.resolve(snapshot.manifest_list))
    reader = fastavro.reader(io.BytesIO(victim.read_bytes()))
    records = list(reader)
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(out, reader.writer_schema, records, metadata=meta, sync_interval=1, codec="null")
    blocks = list(fastavro.block_reader(io.BytesIO(out.getvalue())))
    assert len(blocks) == len(records) == 7
    victim.write_bytes(out.getvalue()[: blocks[-1].offset])  # drop the last block: 6 manifests remain
    with pytest.raises(GpuEngineError, match=re.escape(victim.name)):
        _plan(products)


def test_not_avro(products: Table) -> None:
    victim = _current_manifests(products, 0)[0]
    victim.write_bytes(b'{"not": "avro"}')
    with pytest.raises(ManifestError, match=re.escape(victim.name) + ".*not an Avro"):
        _plan(products)


def test_deletion_vector_without_referenced_data_file(tmp_path: Path) -> None:
    target = tmp_path / "v3_pos_dv"
    shutil.copytree(SHARED / "fixtures" / "pg_lake/sample_tables_v3/public/v3_pos_dv", target)
    tbl = ge.load_table(target, relocate=True)
    assert [len(t.deletes) for t in _plan(tbl).tasks] == [1]
    (victim,) = _current_manifests(tbl, 1)
    reader = fastavro.reader(io.BytesIO(victim.read_bytes()))
    records = cast(list[dict[str, Any]], list(reader))
    for record in records:
        assert record["data_file"]["referenced_data_file"]
        record["data_file"]["referenced_data_file"] = None
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(out, reader.writer_schema, records, metadata=meta, codec="deflate")
    victim.write_bytes(out.getvalue())
    with pytest.raises(GpuEngineError, match="referenced_data_file"):
        _plan(tbl)


@pytest.mark.parametrize("ids", [None, []], ids=["null", "empty"])
def test_an_equality_delete_without_equality_ids_is_refused(tmp_path: Path, ids: list[int] | None) -> None:
    """equality_ids is required for equality deletes: a file without them deletes nothing it should have
    (its rows would come back, and a compaction would keep them for good), so scans and compactions fail
    naming it."""
    import pyarrow as pa

    from tests.commit._support import sql_catalog

    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), properties={"format-version": "2"})
    tbl.append(pa.table({"id": list(range(10))}))
    tbl.delete_rows(pa.table({"id": [3]}), on=["id"])
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None
    [eq_manifest] = [m for m in manifest_files(tbl, snapshot) if m.content == 1]
    path = eq_manifest.manifest_path.removeprefix("file://")
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        schema, meta = reader.writer_schema, dict(reader.metadata)
        entries = [cast(dict[str, Any], e) for e in reader]
    for entry in entries:
        entry["data_file"]["equality_ids"] = ids
    with open(path, "wb") as f:
        kv = {k: str(v) for k, v in meta.items() if not k.startswith("avro.")}
        fastavro.writer(f, schema, entries, codec="deflate", metadata=kv)
    tbl = cat.load_table("db.t")
    for action in (lambda: tbl.scan().to_arrow(), lambda: tbl.compact(options={"rewrite-all": "true"})):
        with pytest.raises(
            PlanningError, match=r"equality delete file .*-deletes\.parquet has no equality_ids"
        ):
            action()


@pytest.mark.parametrize("bad", [None, 5, ["id = 1"]])
def test_a_filter_of_another_kind_is_named(bad: object) -> None:
    """None or a number failed deep in planning ("bind the filter first"), not naming the argument."""
    with pytest.raises(ExpressionError, match=r"scan filter=.*: expected a filter string or an Expression"):
        ScanOptions(cast(Any, bad))


@pytest.mark.parametrize("bad", ["no", 0, None])
def test_case_sensitive_is_a_bool(bad: object) -> None:
    with pytest.raises(PlanningError, match=r"case_sensitive=.*: expected True or False"):
        ScanOptions(case_sensitive=cast(Any, bad))


@pytest.mark.parametrize("as_of", ["2024-01-01", 1.5, True])
def test_as_of_takes_epoch_milliseconds_only(as_of: object) -> None:
    """Java's asOfTime: epoch millis; a datetime or string failed deep inside with a TypeError."""
    with pytest.raises(PlanningError, match=r"as_of=.*: expected milliseconds since the epoch"):
        ScanOptions(as_of=as_of)  # type: ignore[arg-type]
