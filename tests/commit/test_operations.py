"""delete, replace and overwrite snapshots: manifests holding removed files are rewritten (DELETED +
EXISTING entries), the others kept; delete files go to delete manifests; removed files must be live."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from gpu_engine.commit import SnapshotUpdate, ValidationError
from gpu_engine.iceberg.content_file import POSITION_DELETES, ContentFile
from gpu_engine.iceberg.manifest_list import read_manifest_list
from gpu_engine.iceberg.manifests import ADDED, DELETED, EXISTING, read_manifest
from gpu_engine.io.parquet_write import write_data_files
from gpu_engine.io.position_deletes import PATH_FIELD_ID, POS_FIELD_ID
from gpu_engine.table import Table

from ._support import assert_all_readers, rows, sql_catalog, table_files

FAST = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}


def three_appends(tmp_path: Path, version: int) -> tuple[Table, list[pa.Table], list[list[ContentFile]]]:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, partition_spec=["region"],
                           properties={"format-version": str(version), **FAST})  # fmt: skip
    batches, files = [], []
    for start in (0, 30, 60):
        data = rows(start, 30)
        files.append(list(tbl.append(data).files))
        batches.append(data)
    return tbl, batches, files


def ids_in(file: ContentFile) -> list[int]:
    """Ids of the rows a data file holds, read from the Parquet file itself."""
    return [int(v) for v in pq.read_table(file.path).column("id").to_pylist()]


def without(table: pa.Table, ids: set[int]) -> pa.Table:
    return table.filter(pc.invert(pc.is_in(table.column("id"), pa.array(sorted(ids), pa.int64()))))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_delete_data_file_rewrites_only_its_manifest(tmp_path: Path, version: int) -> None:
    tbl, batches, files = three_appends(tmp_path, version)
    victim = files[1][0]
    before_ids = tbl.scan(columns=["id", "_row_id"] if version == 3 else ["id"]).to_arrow()
    old_lists = read_manifest_list(tbl.metadata.current_snapshot().manifest_list)  # type: ignore[union-attr,arg-type]
    result = tbl.commit(SnapshotUpdate("delete", removed=frozenset({victim.path})))
    s = result.summary
    assert s["operation"] == "delete" and s["deleted-data-files"] == "1"
    assert s["deleted-records"] == str(victim.record_count)
    assert s["removed-files-size"] == str(victim.file_size_in_bytes)
    assert s["total-records"] == str(90 - victim.record_count) and s["total-data-files"] == str(
        sum(map(len, files)) - 1
    )
    assert (s["manifests-replaced"], s["manifests-kept"], s["manifests-created"]) == ("1", "2", "1")
    manifests = read_manifest_list(result.manifest_list)
    assert [
        m.manifest_path for m in manifests if m.manifest_path in {o.manifest_path for o in old_lists}
    ] == [
        old_lists[0].manifest_path,
        old_lists[2].manifest_path,
    ]  # fast-append manifests of the other two commits are kept unchanged
    (rewritten,) = [m for m in manifests if m.added_snapshot_id == result.snapshot_id]
    entries = read_manifest(rewritten).to_pylist()
    by_path = {e["file_path"]: e for e in entries}
    assert by_path[victim.path]["status"] == DELETED
    assert by_path[victim.path]["snapshot_id"] == result.snapshot_id
    second = tbl.metadata.snapshots[1]
    for f in files[1][1:]:
        e = by_path[f.path]
        assert e["status"] == EXISTING and e["snapshot_id"] == second.snapshot_id
        assert e["sequence_number"] == second.sequence_number == e["file_sequence_number"]
    kept = without(pa.concat_tables(batches), set(ids_in(victim)))
    assert kept.num_rows == 90 - victim.record_count
    assert_all_readers(tbl, kept)
    if version == 3:  # untouched rows keep their row ids
        after = tbl.scan(columns=["id", "_row_id"]).to_arrow()
        assert set(zip(*after.to_pydict().values(), strict=True)) <= set(
            zip(*before_ids.to_pydict().values(), strict=True)
        )
        assert rewritten.first_row_id is not None and rewritten.existing_rows_count is not None
        assert tbl.metadata.next_row_id == 90 + rewritten.existing_rows_count


@pytest.mark.parametrize("version", [2, 3])
def test_replace_compacts_all_files(tmp_path: Path, version: int) -> None:
    tbl, batches, files = three_appends(tmp_path, version)
    everything = tbl.scan().to_arrow()
    md = tbl.metadata
    compacted = write_data_files(tbl.io, md.location, md.schema, md.spec, everything)
    old = {f.path for group in files for f in group}
    result = tbl.commit(SnapshotUpdate("replace", tuple(compacted), frozenset(old)))
    s = result.summary
    assert s["operation"] == "replace" and s["deleted-data-files"] == str(len(old))
    assert s["added-data-files"] == str(len(compacted)) and s["total-data-files"] == str(len(compacted))
    assert s["added-records"] == s["deleted-records"] == s["total-records"] == "90"
    assert s["manifests-replaced"] == "3" and s["manifests-kept"] == "0"
    assert_all_readers(tbl, pa.concat_tables(batches))
    # the old files are still referenced by older snapshots: nothing was deleted
    assert all(Path(p).exists() for p in old)


def test_overwrite_with_position_deletes(tmp_path: Path) -> None:
    tbl, batches, files = three_appends(tmp_path, 2)
    target = files[0][0]
    target_ids = ids_in(target)
    delete_path = f"{tbl.location}/data/pos-deletes-1.parquet"
    schema = pa.schema(
        [
            pa.field(
                "file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_FIELD_ID)}
            ),
            pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID)}),
        ]
    )
    pq.write_table(pa.table({"file_path": [target.path] * 2, "pos": [0, 2]}, schema=schema), delete_path)
    deletes = ContentFile(
        delete_path, "PARQUET", target.spec_id, target.partition, 2, Path(delete_path).stat().st_size,
        content=POSITION_DELETES, referenced_data_file=target.path,
    )  # fmt: skip
    new_rows = rows(500, 5)
    added = write_data_files(tbl.io, tbl.location, tbl.schema(), tbl.spec(), new_rows)
    removed = files[2][0]
    result = tbl.commit(SnapshotUpdate("overwrite", (*added, deletes), frozenset({removed.path})))
    s = result.summary
    assert s["added-delete-files"] == "1" and s["added-position-delete-files"] == "1"
    assert s["added-position-deletes"] == "2" and s["total-position-deletes"] == "2"
    assert s["total-delete-files"] == "1" and s["deleted-data-files"] == "1"
    lists = read_manifest_list(result.manifest_list)
    assert sorted(m.content for m in lists) == [0, 0, 0, 0, 1]
    (delete_manifest,) = [m for m in lists if m.content == 1]
    assert read_manifest(delete_manifest).column("status").to_pylist() == [ADDED]
    gone = {target_ids[0], target_ids[2], *ids_in(removed)}
    assert_all_readers(tbl, without(pa.concat_tables([*batches, new_rows]), gone))


def test_removing_a_file_not_in_the_table(tmp_path: Path) -> None:
    tbl, _, _ = three_appends(tmp_path, 2)
    before = (tbl.metadata_location, table_files(tbl))
    with pytest.raises(ValidationError, match="not live"):
        tbl.commit(SnapshotUpdate("delete", removed=frozenset({f"{tbl.location}/data/nope.parquet"})))
    assert (tbl.refresh().metadata_location, table_files(tbl)) == before


def test_concurrent_delete_of_the_same_file_fails_validation(tmp_path: Path) -> None:
    tbl, _, files = three_appends(tmp_path, 2)
    assert tbl.catalog is not None
    other = tbl.catalog.load_table(tbl.identifier)
    victim = frozenset({files[0][0].path})
    other.commit(SnapshotUpdate("delete", removed=victim))
    before = table_files(tbl)
    with pytest.raises(ValidationError, match="not live"):
        tbl.commit(SnapshotUpdate("delete", removed=victim))  # conflict, refresh, the file is gone
    assert table_files(tbl) == before
    assert len(tbl.refresh().metadata.snapshots) == 4


def test_update_shape_errors() -> None:
    f = ContentFile("/x.parquet", "PARQUET", 0, (), 1, 1)
    d = ContentFile("/d.parquet", "PARQUET", 0, (), 1, 1, content=POSITION_DELETES)
    with pytest.raises(ValueError, match="removes no files"):
        SnapshotUpdate("append", (f,), frozenset({"/y"}))
    with pytest.raises(ValueError, match="data files only"):
        SnapshotUpdate("append", (d,))
    with pytest.raises(ValueError, match="operation must be"):
        SnapshotUpdate("merge", (f,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="added twice"):
        SnapshotUpdate("overwrite", (f, f))
    with pytest.raises(ValueError, match="both added and removed"):
        SnapshotUpdate("overwrite", (f,), frozenset({"/x.parquet"}))


@pytest.mark.parametrize("stage", ["manifest", "manifest-list", "metadata", "swap"])
def test_faults_while_rewriting_manifests(tmp_path: Path, stage: str) -> None:
    tbl, batches, files = three_appends(tmp_path, 3)
    before = (tbl.metadata_location, table_files(tbl))

    def hook(name: str) -> None:
        if name == stage:
            raise OSError(f"disk failed at {stage}")

    with pytest.raises(OSError, match=stage):
        tbl.commit(SnapshotUpdate("delete", removed=frozenset({files[0][0].path})), faults=hook)
    assert (tbl.refresh().metadata_location, table_files(tbl)) == before
    assert_all_readers(tbl, pa.concat_tables(batches))
