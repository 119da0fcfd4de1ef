"""Optimistic concurrency: stale handles lose the swap, refresh and re-apply; validation re-runs on every
attempt; file-system tables conflict through the version file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.commit import SnapshotUpdate, ValidationError
from gpu_engine.iceberg.metadata import TableMetadata
from gpu_engine.io.parquet_write import write_data_files

from ._support import assert_all_readers, referenced_files, rows, sql_catalog, table_files

FAST = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_two_handles_appending_alternately(tmp_path: Path, version: int) -> None:
    cat = sql_catalog(tmp_path)
    cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": str(version), **FAST})
    a, b = cat.load_table("db.t"), cat.load_table("db.t")
    expected, attempts = [], []
    for i in range(6):
        handle = a if i % 2 == 0 else b
        data = rows(i * 10, 10)
        result = handle.append(data)
        expected.append(data)
        attempts.append(result.commit.attempts)
    assert attempts == [1, 2, 2, 2, 2, 2]  # every handle but the first was one commit behind
    fresh = cat.load_table("db.t")
    md = fresh.metadata
    assert len(md.snapshots) == 6
    chain = [s.parent_snapshot_id for s in md.snapshots]
    assert chain == [None, *(s.snapshot_id for s in md.snapshots[:-1])]  # one linear history
    if version >= 2:
        assert [s.sequence_number for s in md.snapshots] == list(range(1, 7))
    if version == 3:
        assert [s.first_row_id for s in md.snapshots] == list(range(0, 60, 10)) and md.next_row_id == 60
    assert [s.summary["total-records"] for s in md.snapshots if s.summary] == [
        str(10 * k) for k in range(1, 7)
    ]
    assert_all_readers(fresh, pa.concat_tables(expected))
    # failed attempts left nothing behind
    meta = {str(p) for p in (Path(fresh.location) / "metadata").glob("*.metadata.json")}
    assert table_files(fresh) == referenced_files(fresh) | meta and len(meta) == 7


def test_validation_reruns_on_the_refreshed_base(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties=FAST)
    other = cat.load_table("db.t")
    other.append(rows(0, 5))
    seen: list[int] = []

    def validate(md: TableMetadata) -> None:
        seen.append(len(md.snapshots))

    files = write_data_files(tbl.io, tbl.location, tbl.schema(), tbl.spec(), rows(5, 5))
    result = tbl.commit(SnapshotUpdate("append", tuple(files), validate=validate))
    assert seen == [0, 1] and result.attempts == 2  # stale base first, then the refreshed one


def test_failing_validation_commits_nothing(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties=FAST)
    tbl.append(rows(0, 5))
    other = cat.load_table("db.t")
    other.append(rows(5, 5))
    before = table_files(tbl)

    def no_new_snapshots(md: TableMetadata) -> None:
        if len(md.snapshots) > 1:
            raise ValidationError("the table changed since the rewrite was planned")

    files = write_data_files(tbl.io, tbl.location, tbl.schema(), tbl.spec(), rows(10, 5))
    with pytest.raises(ValidationError, match="changed since"):
        tbl.commit(SnapshotUpdate("append", tuple(files), validate=no_new_snapshots))
    assert table_files(tbl) - {f.path for f in files} == before  # the producer's own files are gone
    assert cat.load_table("db.t").metadata.current_snapshot_id == other.metadata.current_snapshot_id


def test_file_system_table_handles_conflict(tmp_path: Path) -> None:
    cat = ge.load_catalog("fs", type="filesystem", warehouse=str(tmp_path))
    cat.create_namespace("db")
    cat.create_table("db.t", rows(0, 0).schema, partition_spec=["bucket(2, id)"],
                     properties={"format-version": "2", **FAST})  # fmt: skip
    a = cat.load_table("db.t")
    b = ge.load_table(tmp_path / "db" / "t")  # through its directory: a file-system catalog of its own
    expected = []
    for i in range(4):
        data = rows(i * 10, 10)
        result = (a if i % 2 == 0 else b).append(data)
        expected.append(data)
        assert result.commit.metadata_location.endswith(f"/v{i + 2}.metadata.json")
    fresh = ge.load_table(tmp_path / "db" / "t")
    assert fresh.metadata_location.endswith("/v5.metadata.json")
    assert [s.sequence_number for s in fresh.metadata.snapshots] == [1, 2, 3, 4]
    assert_all_readers(fresh, pa.concat_tables(expected))
    names = sorted(p.name for p in (tmp_path / "db" / "t" / "metadata").glob("*.metadata.json"))
    assert names == [f"v{k}.metadata.json" for k in range(1, 6)]  # no uncommitted <uuid>.metadata.json left


def test_metadata_file_table_is_read_only(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    static = ge.load_table(tbl.metadata_location)
    with pytest.raises(ge.UnsupportedFeature, match="no catalog to commit to"):
        static.append(rows(0, 5))
    assert not list((Path(tbl.location)).rglob("*.parquet"))


def test_append_to_a_branch(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2"})
    tbl.append(rows(0, 10))
    main_head = tbl.metadata.current_snapshot_id
    result = tbl.append(rows(10, 5), branch="audit")
    md = cat.load_table("db.t").metadata
    assert md.current_snapshot_id == main_head and len(md.snapshot_log) == 1  # main did not move
    audit = md.snapshot_for_ref("audit")
    assert audit.snapshot_id == result.snapshot_id and audit.parent_snapshot_id == main_head
    assert md.refs["audit"].is_branch and audit.summary is not None
    assert audit.summary["total-records"] == "15"
    assert tbl.scan(ref="audit").to_arrow().num_rows == 15 and tbl.scan().to_arrow().num_rows == 10
    tbl.append(rows(15, 5))
    assert tbl.scan().to_arrow().num_rows == 15 and tbl.scan(ref="audit").to_arrow().num_rows == 15
    assert tbl.metadata.last_sequence_number == 3


def test_a_stale_handle_does_not_commit_into_a_table_created_in_its_place(tmp_path: Path) -> None:
    """Dropped and created again under the same name: every commit of a handle of the old table is
    refused (Java: "Table UUID does not match"). A schema or property change, or an append with
    merge_schema, replaced the new table's schema (its files then failed to read)."""
    cat = sql_catalog(tmp_path)
    stale = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    stale.append(pa.table({"id": pa.array([1], pa.int64()), "v": ["old"]}))
    cat.drop_table("db.t")
    fresh = cat.create_table("db.t", pa.schema([("k", pa.int64()), ("name", pa.string())]))
    fresh.append(pa.table({"k": pa.array([10], pa.int64()), "name": ["new"]}))
    merged = pa.table({"id": pa.array([2], pa.int64()), "v": ["x"], "extra": [1.5]})
    attempts: list[Callable[[], object]] = [
        lambda: stale.update_schema().add_column("note", "string").commit(),
        lambda: stale.update_properties().set("k", "v").commit(),
        lambda: stale.append(merged, merge_schema=True),
        lambda: stale.append(merged.select(["id", "v"])),
    ]
    for attempt in attempts:
        with pytest.raises(ValidationError, match="replaced"):
            attempt()
    again = cat.load_table("db.t")
    assert [f.name for f in again.schema().fields] == ["k", "name"] and "k" not in again.properties
    assert again.scan().to_arrow().to_pylist() == [{"k": 10, "name": "new"}]


@pytest.mark.parametrize("branch", [None, "", 5])
def test_a_branch_that_is_not_a_name_is_refused(tmp_path: Path, branch: object) -> None:
    """branch=None committed to a new branch "null" (and 5 to "5"): main untouched, nothing raised."""
    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    files = table_files(tbl)
    writes: list[Callable[[], object]] = [
        lambda: tbl.append(rows(5, 5), branch=branch),  # type: ignore[arg-type]
        lambda: tbl.delete("id = 1", branch=branch),  # type: ignore[arg-type]
        lambda: tbl.delete_rows(rows(0, 1).select(["id"]), on=["id"], branch=branch),  # type: ignore[arg-type]
    ]
    for write in writes:
        with pytest.raises(ValidationError, match="is not a branch name"):
            write()
    assert set(tbl.refresh().metadata.refs) == {"main"} and table_files(tbl) == files
