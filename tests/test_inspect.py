"""``tbl.inspect``: the metadata tables, compared with PyIceberg's ``inspect`` (an independent reader of the
same manifests) on written tables (deletes of every kind, two partition specs, branches, a rollback) and on
every real fixture table PyIceberg can inspect."""

from __future__ import annotations

import uuid
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import gpu_engine as ge
from gpu_engine.errors import ManifestError, MetadataError
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.puffin import read_footer
from gpu_engine.table import Table

from .commit._support import rows, sql_catalog
from .execute.oracles import remapped_copy
from .execute.test_fixture_scans import ENGINE_CANNOT
from .planning._support import FIXTURES, MISSING, inventory_paths

PARTITION_COLUMNS = (
    "spec_id", "record_count", "file_count", "total_data_file_size_in_bytes", "position_delete_record_count",
    "position_delete_file_count", "equality_delete_record_count", "equality_delete_file_count",
    "last_updated_snapshot_id",
)  # fmt: skip
FILE_COLUMNS = ("content", "file_path", "file_format", "spec_id", "record_count", "file_size_in_bytes")
MANIFEST_COLUMNS = (
    "content", "path", "length", "partition_spec_id", "added_snapshot_id", "added_data_files_count",
    "existing_data_files_count", "deleted_data_files_count", "added_delete_files_count",
    "existing_delete_files_count", "deleted_delete_files_count",
)  # fmt: skip


def _static(tbl: Table) -> Any:
    return StaticTable.from_metadata(tbl.metadata_location)


def _bag(table: pa.Table, columns: tuple[str, ...]) -> Counter[tuple[Any, ...]]:
    """The rows of ``columns`` as a multiset (``partition`` structs as sorted item tuples)."""
    picked = [c for c in columns if c in table.column_names]
    out: Counter[tuple[Any, ...]] = Counter()
    for row in table.select(picked).to_pylist():
        out[tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in row.values())] += 1
    return out


def _same(ours: pa.Table, theirs: pa.Table, columns: tuple[str, ...], what: str) -> None:
    shared = tuple(c for c in columns if c in theirs.column_names)
    missing = [c for c in shared if c not in ours.column_names]
    assert not missing, f"{what}: we lack {missing}"
    assert _bag(ours, shared) == _bag(theirs, shared), what


ENTRY_COLUMNS = ("status", "snapshot_id", "sequence_number", "file_sequence_number")


def _entry_bag(table: pa.Table) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for row in table.to_pylist():
        f = row["data_file"]
        out[(*(row[c] for c in ENTRY_COLUMNS), f["content"], f["file_path"], f["record_count"])] += 1
    return out


def _plain(v: Any) -> Any:
    return v.bytes if isinstance(v, uuid.UUID) else v


def _same_metrics(ours: pa.Table, theirs: pa.Table, what: str) -> int:
    """``readable_metrics`` agree per file on every column PyIceberg reports (its top-level primitive
    columns; ours has every primitive column at any depth); returns how many values were compared."""
    mine = {
        r["file_path"]: r["readable_metrics"]
        for r in ours.select(["file_path", "readable_metrics"]).to_pylist()
    }
    compared = 0
    for row in theirs.select(["file_path", "readable_metrics"]).to_pylist():
        for column, metrics in (row["readable_metrics"] or {}).items():
            if all(v is None for v in metrics.values()):
                continue  # PyIceberg's struct columns (metrics live on their leaves)
            got = mine[row["file_path"]][column]
            assert {k: _plain(v) for k, v in got.items()} == {k: _plain(v) for k, v in metrics.items()}, (
                f"{what}: {row['file_path']} {column}"
            )
            compared += 1
    return compared


def _history_table(tmp_path: Path) -> Table:
    """A v2 table partitioned by region, then also by bucket(2, id); appends, a position delete, an equality
    delete, a branch, a tag and a rollback."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        "db.t", rows(0, 0).schema, partition_spec=["region"], properties={"format-version": "2"}
    )
    tbl.append(rows(0, 30))
    tbl.append(rows(30, 30, seed=1))
    tbl.delete("id < 5")
    with tbl.update_spec() as s:
        s.add_field("bucket(2, id)")
    tbl.append(rows(60, 30, seed=2))
    tbl.delete_rows(
        pa.table({"id": pa.array([40, 70], pa.int64()), "region": ["eu", "eu"]}), on=["id", "region"]
    )
    tbl.manage_snapshots().create_tag("before-bad").create_branch("dev").commit()
    good = tbl.metadata.current_snapshot_id
    assert good is not None
    tbl.delete("id >= 80")
    tbl.manage_snapshots().rollback_to(good).commit()
    tbl.append(rows(90, 5, seed=3), branch="dev")
    return tbl


def test_metadata_tables_match_pyiceberg(tmp_path: Path) -> None:
    tbl = _history_table(tmp_path)
    theirs = _static(tbl).inspect
    partitions = tbl.inspect.partitions()
    _same(partitions, theirs.partitions(), ("partition", *PARTITION_COLUMNS), "partitions")
    assert len({row["spec_id"] for row in partitions.to_pylist()}) == 2  # files of both specs
    assert sum(partitions["equality_delete_file_count"].to_pylist()) >= 1
    files = tbl.inspect.files()
    _same(files, theirs.files(), FILE_COLUMNS, "files")
    assert sorted(set(files["content"].to_pylist())) == [0, 1, 2]
    assert _same_metrics(files, theirs.files(), "files readable_metrics") > 100
    entries = tbl.inspect.entries()
    assert _entry_bag(entries) == _entry_bag(theirs.entries())
    dev = tbl.metadata.refs["dev"].snapshot_id
    assert _entry_bag(tbl.inspect.entries(snapshot_id=dev)) == _entry_bag(theirs.entries(snapshot_id=dev))
    all_entries = tbl.inspect.all_entries()
    assert all_entries.num_rows > entries.num_rows and set(all_entries.column_names) == set(
        entries.column_names
    )
    _same(tbl.inspect.manifests(), theirs.manifests(), MANIFEST_COLUMNS, "manifests")
    _same(tbl.inspect.snapshots(), theirs.snapshots(), ("snapshot_id", "parent_id", "operation"), "snapshots")
    refs_columns = ("name", "type", "snapshot_id", "max_reference_age_in_ms", "min_snapshots_to_keep")
    _same(tbl.inspect.refs(), theirs.refs(), refs_columns, "refs")
    history = tbl.inspect.history()
    _same(history, theirs.history(), ("snapshot_id", "parent_id", "is_current_ancestor"), "history")
    assert False in history["is_current_ancestor"].to_pylist()  # the rolled-back delete
    data, deletes = tbl.inspect.data_files(), tbl.inspect.delete_files()
    _same(data, theirs.data_files(), FILE_COLUMNS, "data_files")
    _same(deletes, theirs.delete_files(), FILE_COLUMNS, "delete_files")
    assert data.num_rows + deletes.num_rows == files.num_rows and data.num_rows and deletes.num_rows
    all_manifests = tbl.inspect.all_manifests()
    _same(
        all_manifests, theirs.all_manifests(), (*MANIFEST_COLUMNS, "reference_snapshot_id"), "all_manifests"
    )
    assert len(set(all_manifests["reference_snapshot_id"].to_pylist())) == len(tbl.metadata.snapshots)
    for name in ("all_files", "all_data_files", "all_delete_files"):
        _same(getattr(tbl.inspect, name)(), getattr(theirs, name)(), FILE_COLUMNS, name)
    assert tbl.inspect.all_files().num_rows > files.num_rows  # rows of replaced and expired-from-head files
    log_columns = ("file", "latest_snapshot_id", "latest_schema_id", "latest_sequence_number")
    log = tbl.inspect.metadata_log_entries()
    _same(log, theirs.metadata_log_entries(), log_columns, "metadata_log_entries")
    assert log["file"].to_pylist()[-1] == tbl.metadata_location
    on_main = sum(partitions["record_count"].to_pylist())
    assert sum(tbl.inspect.partitions(snapshot_id=dev)["record_count"].to_pylist()) == on_main + 5


def test_entries_list_the_files_a_compaction_removed(tmp_path: Path) -> None:
    tbl = sql_catalog(tmp_path).create_table("db.c", rows(0, 0).schema, properties={"format-version": "2"})
    for i in range(3):
        tbl.append(rows(i * 10, 10, seed=i))
    tbl.compact(options={"rewrite-all": "true"})
    entries = tbl.inspect.entries()
    assert sorted(entries["status"].to_pylist()) == [1, 2, 2, 2]  # one file added, three removed
    assert _entry_bag(entries) == _entry_bag(_static(tbl).inspect.entries())
    rewritten = tbl.inspect.entries(snapshot_id=tbl.metadata.snapshots[0].snapshot_id)
    assert rewritten["status"].to_pylist() == [1]
    metrics = entries["readable_metrics"].to_pylist()[0]
    assert sorted(metrics) == sorted(f.name for f in tbl.schema().fields)  # every primitive column, by name
    assert metrics["id"]["lower_bound"] == 0 and metrics["id"]["upper_bound"] == 29


def test_an_unpartitioned_table_has_one_partition_row(tmp_path: Path) -> None:
    tbl = sql_catalog(tmp_path).create_table("db.u", rows(0, 0).schema, properties={"format-version": "3"})
    assert tbl.inspect.partitions().num_rows == 0 and tbl.inspect.files().num_rows == 0
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 10, seed=1))
    tbl.delete("id < 3")  # a deletion vector
    partitions = tbl.inspect.partitions()
    assert "partition" not in partitions.column_names and partitions.num_rows == 1
    row = partitions.to_pylist()[0]
    assert (row["record_count"], row["file_count"]) == (20, 2)
    assert (row["position_delete_record_count"], row["position_delete_file_count"]) == (3, 1)
    dv = [f for f in tbl.inspect.files().to_pylist() if f["content"] == 1]
    assert dv[0]["file_format"] == "PUFFIN" and dv[0]["referenced_data_file"] is not None


def test_float_partitions_are_grouped_by_their_bits(tmp_path: Path) -> None:
    """Spec: partition values compare by bits, NaN canonical: all NaNs one partition, -0.0 and 0.0 two
    (PyIceberg 0.12 lists each NaN file apart, so it is no oracle here)."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.float64())])
    tbl = sql_catalog(tmp_path).create_table("db.f", schema, partition_spec=["v"])
    for i, v in enumerate([float("nan"), float("-nan"), float("nan"), -0.0, 0.0, 0.0]):
        tbl.append(pa.table({"id": [i], "v": [v]}, schema=schema))
    counts = sorted(
        (repr(r["partition"]["v"]), r["file_count"]) for r in tbl.inspect.partitions().to_pylist()
    )
    assert counts == [("-0.0", 1), ("0.0", 2), ("nan", 3)]


FIXTURES_INSPECTED = [rel for rel in inventory_paths() if rel not in ENGINE_CANNOT]


@pytest.mark.parametrize("rel", FIXTURES_INSPECTED)
def test_fixture_metadata_tables_match_pyiceberg(rel: str) -> None:
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    metadata = remapped_copy(rel)
    tbl = ge.load_table(str(metadata))
    if tbl.metadata.current_snapshot_id is None:
        pytest.skip("no current snapshot")
    ours = {
        "files": tbl.inspect.files(),
        "manifests": tbl.inspect.manifests(),
        "entries": tbl.inspect.entries(),
    }
    ours["partitions"] = tbl.inspect.partitions()  # whether PyIceberg can inspect the table or not
    try:  # some fixtures ship only the current snapshot's files, or a snapshot id past the long range
        ours["all_manifests"], ours["all_files"] = tbl.inspect.all_manifests(), tbl.inspect.all_files()
    except (ManifestError, MetadataError) as exc:
        assert "file not found" in str(exc) or "does not fit a long" in str(exc), exc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = StaticTable.from_metadata(str(metadata)).inspect
            expected = {"files": theirs.files(), "manifests": theirs.manifests()}
            expected["partitions"] = theirs.partitions()
            if "all_files" in ours:
                expected["all_manifests"], expected["all_files"] = theirs.all_manifests(), theirs.all_files()
            else:
                with pytest.raises(Exception, match=r"No such file|not found|does not exist|too large"):
                    theirs.all_manifests()
    except Exception as exc:  # PyIceberg cannot inspect every table: not the oracle then
        pytest.skip(f"PyIceberg cannot inspect it: {type(exc).__name__}: {str(exc)[:120]}")
    _same(ours["files"], expected["files"], FILE_COLUMNS, f"{rel}: files")
    _same_metrics(ours["files"], expected["files"], f"{rel}: files readable_metrics")
    try:  # PyIceberg 0.12's entries() fails on DV entries and on files without column sizes
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected["entries"] = theirs.entries()
    except (TypeError, ValueError, KeyError):
        return
    assert _entry_bag(ours["entries"]) == _entry_bag(expected["entries"]), f"{rel}: entries"
    _same(ours["manifests"], expected["manifests"], MANIFEST_COLUMNS, f"{rel}: manifests")
    _same(ours["partitions"], expected["partitions"], PARTITION_COLUMNS, f"{rel}: partitions")
    if "all_files" in ours:
        all_manifests = (*MANIFEST_COLUMNS, "reference_snapshot_id")
        _same(ours["all_manifests"], expected["all_manifests"], all_manifests, f"{rel}: all_manifests")
        _same(ours["all_files"], expected["all_files"], FILE_COLUMNS, f"{rel}: all_files")


def test_partitions_merge_files_of_specs_with_the_same_fields(tmp_path: Path) -> None:
    """Java's PartitionsTable groups by the partition in the table-wide type, not by spec: after a renamed
    field (a new spec, same field id) one partition is still one row, its spec_id the newest file's."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("a", pa.int32())])
    tbl = sql_catalog(tmp_path).create_table("db.p", schema, partition_spec=["a"])
    tbl.append(pa.table({"id": [1], "a": pa.array([1], pa.int32())}))
    with tbl.update_spec() as s:
        s.rename_field("a", "a_renamed")
    tbl.append(pa.table({"id": [2, 3], "a": pa.array([1, 1], pa.int32())}))
    assert len(tbl.metadata.specs) == 2
    rows_ = tbl.inspect.partitions().to_pylist()
    assert [(r["partition"], r["spec_id"], r["record_count"], r["file_count"]) for r in rows_] == [
        ({"a_renamed": 1}, 1, 3, 2)
    ]


def test_a_partition_field_of_a_dropped_column_leaves_the_partition_type(tmp_path: Path) -> None:
    """Java's Partitioning.partitionType keeps only fields whose source column the schema still has: the
    partitions table becomes the unpartitioned form, and ``_partition`` an empty struct."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("a", pa.int32())])
    tbl = sql_catalog(tmp_path).create_table("db.d", schema, partition_spec=["a"])
    tbl.append(pa.table({"id": [1, 2], "a": pa.array([1, 2], pa.int32())}))
    with tbl.update_spec() as s:
        s.remove_field("a")
    with tbl.update_schema() as u:
        u.delete_column("a")
    tbl.append(pa.table({"id": [3]}))
    partitions = tbl.inspect.partitions()
    assert "partition" not in partitions.column_names and partitions.num_rows == 1
    assert partitions.to_pylist()[0]["record_count"] == 3
    assert tbl.inspect.files().schema.field("partition").type == pa.struct([])
    scanned = tbl.scan(columns=["id", "_partition"]).to_arrow()
    assert scanned.schema.field("_partition").type == pa.struct([])


def test_snapshot_summaries_leave_the_operation_to_its_column(tmp_path: Path) -> None:
    tbl = _history_table(tmp_path)
    ours = {r["snapshot_id"]: dict(r["summary"]) for r in tbl.inspect.snapshots().to_pylist()}
    theirs = {r["snapshot_id"]: dict(r["summary"]) for r in _static(tbl).inspect.snapshots().to_pylist()}
    assert ours == theirs and all("operation" not in s for s in ours.values())


def test_manifest_partition_summaries_match_pyiceberg(tmp_path: Path) -> None:
    tbl = _history_table(tmp_path)
    for ours_t, theirs_t in (
        (tbl.inspect.manifests(), _static(tbl).inspect.manifests()),
        (tbl.inspect.all_manifests(), _static(tbl).inspect.all_manifests()),
    ):
        ours = sorted((r["path"], str(r["partition_summaries"])) for r in ours_t.to_pylist())
        theirs = sorted((r["path"], str(r["partition_summaries"])) for r in theirs_t.to_pylist())
        assert ours == theirs and any("'lower_bound': 'eu'" in s for _, s in ours)


def test_deletion_vector_rows_name_their_blob(tmp_path: Path) -> None:
    """``content_offset`` / ``content_size_in_bytes`` (Java's DataFile fields 144/145) tell two DVs of one
    Puffin file apart; they are the blobs the Puffin footer lists."""
    tbl = sql_catalog(tmp_path).create_table("db.v", rows(0, 0).schema, properties={"format-version": "3"})
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 10, seed=1))
    tbl.delete("id < 3 or id > 17")  # one DV per data file, in one Puffin file
    dvs = [f for f in tbl.inspect.files().to_pylist() if f["content"] == 1]
    assert len(dvs) == 2 and len({f["file_path"] for f in dvs}) == 1
    footer = read_footer(tbl.io, dvs[0]["file_path"])
    assert sorted((f["content_offset"], f["content_size_in_bytes"]) for f in dvs) == sorted(
        (b.offset, b.length) for b in footer.blobs
    )
    assert all(f["key_metadata"] is None for f in dvs)


def test_readable_metrics_have_no_field_for_a_variant_column() -> None:
    """Java's MetricsUtil.readableMetricsSchema takes primitive columns only; a variant is none."""
    tbl = ge.load_table(FIXTURES / "impala/iceberg_test/iceberg_v3/trino_variant", relocate=True)
    assert any(f.type == it.VARIANT for f in tbl.schema().fields)
    metrics = tbl.inspect.files().schema.field("readable_metrics").type
    assert sorted(metrics.field(i).name for i in range(metrics.num_fields)) == ["descr", "id"]


def test_truncated_bounds_of_a_long_fixed_column_read_as_binary(tmp_path: Path) -> None:
    """truncate(16) cuts fixed(20) bounds to 16 bytes (as Java's ParquetUtil): readable_metrics failed to
    cast them to fixed_size_binary[20]."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("f", pa.binary(20))])
    tbl = sql_catalog(tmp_path).create_table("db.x", schema)
    tbl.append(pa.table({"id": [1, 2], "f": [b"\x01" * 20, b"\x02" * 20]}, schema=schema))
    for name in ("files", "data_files", "entries", "all_files"):
        assert getattr(tbl.inspect, name)().num_rows == 1
    metrics = tbl.inspect.files().column("readable_metrics").to_pylist()[0]["f"]
    assert (metrics["lower_bound"], metrics["upper_bound"]) == (b"\x01" * 16, b"\x02" * 15 + b"\x03")
