"""tbl.append on v1/v2/v3 tables, unpartitioned and partitioned by every transform, read back by our scan,
PyIceberg (StaticTable and its SqlCatalog over the same SQLite file) and DuckDB; snapshot fields checked
against hand computation."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.commit import table_update
from gpu_engine.errors import InvalidProperty, SchemaMismatch
from gpu_engine.iceberg.manifest_list import read_manifest_list

from ._support import (
    assert_all_readers,
    assert_same_rows,
    pyiceberg_catalog,
    referenced_files,
    rows,
    sql_catalog,
    table_files,
)

SPECS = {
    "unpartitioned": [],
    "identity": ["region"],
    "day": ["day(ts)"],
    "bucket": ["bucket(4, id)"],
    "year-truncate": ["year(d)", "truncate(2, s)"],
    "month-bucket": ["month(ts)", "bucket(8, id)"],  # two time transforms of ts: redundant (Java)
    "hour": ["hour(ts)"],
}
BATCHES = ((0, 25), (25, 10), (35, 30))


@pytest.mark.parametrize("spec", list(SPECS))
@pytest.mark.parametrize("version", [1, 2, 3])
def test_appends_read_back_by_every_reader(tmp_path: Path, version: int, spec: str) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        "db.t", rows(0, 0).schema, partition_spec=SPECS[spec], properties={"format-version": str(version)}
    )
    expected = []
    for start, n in BATCHES:
        data = rows(start, n)
        # batches, a table and a reader all work as input
        result = tbl.append(data.to_batches(max_chunksize=7) if start else data)
        expected.append(data)
        assert result.rows == n and sum(f.record_count for f in result.files) == n
        assert tbl.metadata.current_snapshot_id == result.snapshot_id
    want = pa.concat_tables(expected)
    assert_all_readers(tbl, want, pyiceberg=True)
    assert_same_rows(pyiceberg_catalog(tmp_path, "db.t"), want, context="pyiceberg SqlCatalog")
    reloaded = cat.load_table("db.t")
    assert reloaded.metadata == tbl.metadata  # the handle holds what the file says
    assert_same_rows(reloaded.scan().to_arrow(), want, context="reloaded from the catalog")
    # nothing written but what the snapshots reference, plus the metadata files
    meta = {str(p) for p in (Path(tbl.location) / "metadata").glob("*.metadata.json")}
    assert table_files(tbl) == referenced_files(tbl) | meta
    assert len(meta) == 1 + len(BATCHES)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_snapshot_fields_by_hand(tmp_path: Path, version: int) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, partition_spec=["region"],
                           properties={"format-version": str(version)})  # fmt: skip
    created = tbl.metadata_location
    counts, totals, sizes = [], 0, 0
    for start, n in BATCHES:
        data = rows(start, n)
        result = tbl.append(data)
        partitions = len(set(data.column("region").to_pylist()))  # identity: one file per region (or null)
        totals += n
        sizes += sum(f.file_size_in_bytes for f in result.files)
        counts.append((n, partitions))
        s = result.commit.summary
        assert len(result.files) == partitions
        assert s["operation"] == "append"
        assert s["added-records"] == str(n) and s["added-data-files"] == str(partitions)
        assert s["added-files-size"] == str(sum(f.file_size_in_bytes for f in result.files))
        assert s["total-records"] == str(totals) and s["total-files-size"] == str(sizes)
        assert s["total-data-files"] == str(sum(p for _, p in counts))
        assert s["total-delete-files"] == "0" and s["changed-partition-count"] == str(partitions)
        assert "deleted-records" not in s and "added-delete-files" not in s
    md = tbl.metadata
    snaps = md.snapshots
    assert len(snaps) == 3 and md.current_snapshot_id == snaps[-1].snapshot_id
    assert [s.parent_snapshot_id for s in snaps] == [None, snaps[0].snapshot_id, snaps[1].snapshot_id]
    assert all(s.schema_id == 0 for s in snaps)
    assert [e.snapshot_id for e in md.snapshot_log] == [s.snapshot_id for s in snaps]
    assert md.refs["main"].snapshot_id == snaps[-1].snapshot_id
    assert md.metadata_log[0].metadata_file == created and len(md.metadata_log) == 3
    if version == 1:
        assert [s.sequence_number for s in snaps] == [0, 0, 0] and md.last_sequence_number == 0
    else:
        assert [s.sequence_number for s in snaps] == [1, 2, 3] and md.last_sequence_number == 3
    manifests = read_manifest_list(snaps[-1].manifest_list or "")
    assert len(manifests) == 3  # fast append: one new manifest per commit, the older ones kept
    assert [m.added_rows_count for m in manifests] == [n for n, _ in reversed(counts)]
    if version == 3:
        starts = [0, BATCHES[0][1], BATCHES[0][1] + BATCHES[1][1]]
        assert [s.first_row_id for s in snaps] == starts
        assert [s.added_rows for s in snaps] == [n for _, n in BATCHES]
        assert md.next_row_id == totals
        assert [m.first_row_id for m in manifests] == list(reversed(starts))
        ids = tbl.scan(columns=["id", "_row_id"]).to_arrow()
        assert sorted(ids.column("_row_id").to_pylist()) == list(range(totals))
    else:
        assert md.next_row_id is None and all(s.first_row_id is None for s in snaps)


def test_schema_mismatch_commits_nothing(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    before = (tbl.metadata_location, table_files(tbl))
    bad = rows(5, 5).append_column("extra", pa.array(range(5)))
    with pytest.raises(SchemaMismatch, match="'extra'"):
        tbl.append(bad)
    wrong_type = rows(5, 5).set_column(3, "region", pa.array(range(5)))
    with pytest.raises(SchemaMismatch, match="region"):
        tbl.append(wrong_type)
    missing_required = rows(5, 5).drop_columns(["id"])
    with pytest.raises(SchemaMismatch, match="id"):
        tbl.append(missing_required)
    assert (cat.load_table("db.t").metadata_location, table_files(tbl)) == before


def test_all_null_arrow_columns_fill_optional_columns_only(tmp_path: Path) -> None:
    """Arrow's ``null`` type (what pandas gives an all-None column) holds nulls of any optional column,
    nested ones too; a required column refuses it, naming the column."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    data = rows(0, 4)
    for name in ("region", "amount", "ts"):
        data = data.set_column(data.schema.get_field_index(name), name, pa.nulls(4))
    tbl.append(data)
    got = tbl.scan().to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == [0, 1, 2, 3]
    assert all(got.column(c).null_count == 4 for c in ("region", "amount", "ts"))
    assert got.column("s").to_pylist() == rows(0, 4).column("s").to_pylist()
    null_ids = rows(4, 2).set_column(0, "id", pa.nulls(2))
    with pytest.raises(SchemaMismatch, match="'id' is required but 2 of its values are null"):
        tbl.append(null_ids)


def test_narrower_types_are_cast(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    data = rows(0, 5)
    narrow = data.set_column(0, "id", pc.cast(data.column("id"), pa.int32()))
    tbl.append(narrow)
    assert_same_rows(tbl.scan().to_arrow(), data, context="int32 ids appended to a long column")


def test_metadata_log_limit_and_gzip_metadata(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    props = {"write.metadata.previous-versions-max": "2", "write.metadata.compression-codec": "gzip"}
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties=props)
    locations = [tbl.metadata_location]
    for i in range(4):
        tbl.append(rows(i * 5, 5))
        locations.append(tbl.metadata_location)
    assert all(p.endswith(".gz.metadata.json") for p in locations[1:])
    assert [Path(p).name[:6] for p in locations] == ["00000-", "00001-", "00002-", "00003-", "00004-"]
    assert Path(locations[-1]).read_bytes()[:2] == b"\x1f\x8b"
    assert [e.metadata_file for e in tbl.metadata.metadata_log] == locations[2:4]  # the newest two
    assert_all_readers(tbl, pa.concat_tables([rows(i * 5, 5) for i in range(4)]))
    assert all(Path(p).exists() for p in locations)  # kept unless asked: Java's default


def test_metadata_files_dropped_from_the_log_are_deleted_when_asked(tmp_path: Path) -> None:
    """write.metadata.delete-after-commit.enabled: a file trimmed from the log goes after the commit (data
    and metadata-only commits alike), as Java's and PyIceberg's table operations do."""
    props = {
        "write.metadata.previous-versions-max": "1",
        "write.metadata.delete-after-commit.enabled": "true",
    }
    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema, properties=props)
    locations = [tbl.metadata_location]
    for i in range(3):
        tbl.append(rows(i * 5, 5))
        locations.append(tbl.metadata_location)
    with tbl.update_properties() as p:
        p.set("comment", "metadata-only")
    locations.append(tbl.metadata_location)
    assert [e.metadata_file for e in tbl.metadata.metadata_log] == locations[-2:-1]
    assert [Path(p).exists() for p in locations] == [False, False, False, True, True]
    assert_all_readers(tbl, pa.concat_tables([rows(i * 5, 5) for i in range(3)]))


def test_every_write_keeps_bounds_on_the_tables_sort_columns(tmp_path: Path) -> None:
    """Appends, overwrites and upserts too, not only a sorting compaction (Java's MetricsConfig.forTable)."""
    data = pa.table({"id": pa.array([3, 1, 2], pa.int64()), "v": ["c", "a", "b"]})
    tbl = sql_catalog(tmp_path).create_table(
        "db.s", data.schema, sort_order="id", properties={"write.metadata.metrics.default": "counts"}
    )
    tbl.append(data)
    tbl.overwrite(data.slice(0, 1), "id = 3")
    tbl.upsert(pa.table({"id": pa.array([4], pa.int64()), "v": ["d"]}), on=["id"])
    files = [f for f in tbl.inspect.files().to_pylist() if f["content"] == 0]
    assert len(files) == 3
    for f in files:  # id (field 1) has bounds; v, counts only, has none
        assert [fid for fid, _ in f["lower_bounds"]] == [1] and [fid for fid, _ in f["upper_bounds"]] == [1]
        assert f["sort_order_id"] is None  # the rows were not sorted


def test_metadata_files_go_to_write_metadata_path(tmp_path: Path) -> None:
    """Metadata files, manifest lists and manifests all go to write.metadata.path when it is set (Java's
    metastore table operations, PyIceberg's locations); the table reads the same through every reader."""
    alt = tmp_path / "alt-metadata"
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", rows(0, 0).schema, properties={"write.metadata.path": str(alt)}
    )
    tbl.append(rows(0, 5))
    tbl.delete("id = 2")
    with tbl.update_properties() as p:
        p.set("comment", "metadata-only")
    assert tbl.metadata_location.removeprefix("file://").startswith(str(alt))
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    assert snapshot.manifest_list.removeprefix("file://").startswith(str(alt))
    written = {p.name for p in alt.iterdir()}
    assert sum(n.endswith(".metadata.json") for n in written) == 4  # create, append, delete, properties
    assert sum(n.startswith("snap-") for n in written) == 2 and sum("-m" in n for n in written) >= 2
    default = Path(tbl.location.removeprefix("file://")) / "metadata"
    assert not default.exists() or not any(default.iterdir())
    assert_all_readers(tbl, rows(0, 5).filter(pc.not_equal(rows(0, 5)["id"], 2)))


def test_previous_versions_max_is_checked_when_set_and_read_from_the_new_metadata(tmp_path: Path) -> None:
    """Java's TableMetadata.Builder reads the property from the new metadata: a bad value ('x') blocked
    every later commit here, the one removing or correcting it too; it is now refused when set, and an
    update fixing a bad value written by another engine lands (and trims the log in the same commit)."""
    key = "write.metadata.previous-versions-max"
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    for i in range(3):
        tbl.append(rows(i * 5, 5))
    with pytest.raises(InvalidProperty, match=rf"{re.escape(key)}='x'"):
        tbl.update_properties().set(key, "x").commit()
    with pytest.raises(InvalidProperty, match=r"write.summary.partition-limit='-1'"):
        tbl.update_properties().set("write.summary.partition-limit", "-1").commit()
    bad = replace(tbl.metadata, properties={**tbl.metadata.properties, key: "x"})
    path = table_update.metadata_path(bad, tbl.metadata_location, file_system_table=False)
    table_update.write_metadata(tbl.io, tbl.io.resolve(path), bad)
    cat.commit_metadata("db.t", tbl.metadata_location, path)
    tbl = cat.load_table("db.t")
    with tbl.update_properties() as p:
        p.set(key, "1")
    assert len(tbl.metadata.metadata_log) == 1
    tbl.append(rows(15, 5))
    assert_all_readers(tbl, pa.concat_tables([rows(i * 5, 5) for i in range(4)]))


def _summary(tbl: Any) -> dict[str, str]:
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return dict(snapshot.summary)


def test_partition_summaries_follow_write_summary_partition_limit(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    props = {"write.summary.partition-limit": "10"}
    tbl = sql_catalog(tmp_path).create_table("db.p", schema, partition_spec=["s"], properties=props)
    tbl.append(pa.table({"id": [1, 2, 3], "s": ["a b", "b", "b"]}, schema=schema))
    summary = _summary(tbl)
    assert summary["partition-summaries-included"] == "true"
    sizes = {r["partition"]["s"]: r["file_size_in_bytes"] for r in tbl.inspect.files().to_pylist()}
    assert (
        summary["partitions.s=a+b"] == f"added-data-files=1,added-records=1,added-files-size={sizes['a b']}"
    )
    assert summary["partitions.s=b"] == f"added-data-files=1,added-records=2,added-files-size={sizes['b']}"
    with tbl.update_properties() as p:
        p.set("write.summary.partition-limit", "1")
    tbl.append(pa.table({"id": [4, 5], "s": ["c", "d"]}, schema=schema))
    summary = _summary(tbl)
    assert not [k for k in summary if k.startswith("partition")]  # Java writes neither key then
