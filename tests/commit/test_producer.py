"""The snapshot producer's preconditions: tables it must not write to are refused before anything is
written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from gpu_engine.commit.producer import _Producer
from gpu_engine.errors import UnsupportedFeature
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.table import Table
from tests.commit._support import interrupted_at, lines_between, referenced_files, sql_catalog

ENCRYPTED = {"format-version": "3", "encryption.key-id": "kms-key-1"}


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and "metadata" not in p.parts}


def encrypted_table(tmp_path: Path) -> Table:
    cat = sql_catalog(tmp_path)
    cat.create_table("db.plain", schema=pa.schema([("id", pa.int64())]), properties={"format-version": "3"})
    plain = cat.load_table("db.plain")
    plain.append(pa.table({"id": [1, 2, 3]}))
    plain.update_properties().set(
        "encryption.key-id", "kms-key-1"
    ).commit()  # a metadata-only change: allowed
    return cat.load_table("db.plain")


@pytest.mark.parametrize(
    "write",
    [
        lambda t: t.append(pa.table({"id": [4]})),
        lambda t: t.delete("id = 2"),
        lambda t: t.delete_rows(pa.table({"id": [2]}), on=["id"]),
        lambda t: t.overwrite(pa.table({"id": [9]})),
        lambda t: t.compact(options={"rewrite-all": "true"}),
    ],
    ids=["append", "delete", "delete_rows", "overwrite", "compact"],
)
def test_an_encrypted_table_is_not_written_in_plaintext(tmp_path: Path, write: object) -> None:
    """Java encrypts the files of a table with ``encryption.key-id``; gpu-engine cannot, so it refuses
    (naming the property) before writing a file, and the table keeps its rows and snapshot."""
    tbl = encrypted_table(tmp_path)
    before, snapshot = files_under(tmp_path / "wh"), tbl.metadata.current_snapshot_id
    with pytest.raises(
        UnsupportedFeature, match=r"encrypted \(table property encryption.key-id='kms-key-1'\)"
    ):
        write(tbl)  # type: ignore[operator]
    tbl.refresh()
    assert tbl.metadata.current_snapshot_id == snapshot and files_under(tmp_path / "wh") == before
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_an_encrypted_table_can_be_created_and_maintained(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), properties=ENCRYPTED)
    assert tbl.properties["encryption.key-id"] == "kms-key-1"
    tbl.update_properties().set("comment", "metadata-only changes write no data files").commit()
    tbl.expire_snapshots(retain_last=1)
    with pytest.raises(UnsupportedFeature, match=r"encryption\.key-id"):
        tbl.append(pa.table({"id": [1]}))


@pytest.mark.parametrize(
    "write",
    [
        lambda t, hook: t.append(pa.table({"id": [4]}), faults=hook),
        lambda t, hook: t.delete("id = 2", faults=hook),
        lambda t, hook: t.compact(options={"rewrite-all": "true"}, faults=hook),
    ],
    ids=["append", "delete", "compact"],
)
def test_a_table_made_encrypted_while_writing_is_not_committed_to(tmp_path: Path, write: Any) -> None:
    """Another writer sets encryption.key-id after the first check: the retry on the refreshed table
    checks again, refuses, and removes the plaintext files written (they were committed)."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), properties={"format-version": "2"})
    tbl.append(pa.table({"id": [1, 2, 3]}))
    tbl.append(pa.table({"id": [5]}))
    other = cat.load_table("db.t")
    before = files_under(tmp_path / "wh")
    done: list[str] = []

    def encrypt_meanwhile(stage: str) -> None:
        if stage == "manifest" and not done:
            done.append(stage)
            other.update_properties().set("encryption.key-id", "kms-key-1").commit()

    with pytest.raises(UnsupportedFeature, match=r"encryption\.key-id='kms-key-1'"):
        write(tbl, encrypt_meanwhile)
    assert done and files_under(tmp_path / "wh") == before
    fresh = cat.load_table("db.t")
    assert fresh.metadata.current_snapshot_id == other.metadata.current_snapshot_id
    assert sorted(fresh.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 5]


@pytest.mark.parametrize("line", lines_between(_Producer._swap, ") from exc", "return location"))
def test_ctrl_c_once_the_swap_landed_keeps_the_commits_files(tmp_path: Path, line: int) -> None:
    """Interrupted between the catalog's swap returning and the commit recording that it landed: the clean-up
    took the commit for a failed one and deleted the files of the table's current snapshot."""
    tbl = sql_catalog(tmp_path).create_table("db.t", pa.schema([("id", pa.int64())]))
    tbl.append(pa.table({"id": pa.array(range(5), pa.int64())}))
    with pytest.raises(KeyboardInterrupt), interrupted_at(_Producer._swap, line):
        tbl.append(pa.table({"id": pa.array(range(5, 10), pa.int64())}))
    landed = sql_catalog(tmp_path).load_table("db.t")
    assert not [p for p in referenced_files(landed) if not Path(p.removeprefix("file://")).exists()]
    assert sorted(landed.scan().to_arrow().column("id").to_pylist()) == list(range(10))


@pytest.mark.parametrize("upgrade", [(1, 2), (2, 3), (1, 3)], ids=["v1-v2", "v2-v3", "v1-v3"])
def test_a_retry_after_an_upgrade_writes_its_manifests_for_the_new_version(
    tmp_path: Path, upgrade: tuple[int, int]
) -> None:
    """An append loses its race to an upgrade and an equality delete: its retry listed the manifest written
    for the old version (v1: sequence number 0) in the new manifest list, so its file read as data
    sequence number 0 and the earlier delete removed the row appended after it."""
    old, new = upgrade
    cat = sql_catalog(tmp_path)
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    tbl = cat.create_table("db.t", schema=rows.schema, properties={"format-version": str(old)})
    tbl.append(rows)
    stale = cat.load_table("db.t")
    other = cat.load_table("db.t")
    other.update_properties().set("format-version", str(new)).commit()
    other.delete_rows(pa.table({"id": pa.array([2], pa.int64())}), on=["id"])
    stale.append(pa.table({"id": pa.array([2], pa.int64())}))
    fresh = cat.load_table("db.t")
    assert sorted(fresh.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    snap = fresh.metadata.current_snapshot()
    assert snap is not None
    added = [e for e in fresh.inspect.entries().to_pylist() if e["snapshot_id"] == snap.snapshot_id]
    assert [e["sequence_number"] for e in added] == [snap.sequence_number]
    (manifest,) = [
        m for m in fresh.inspect.manifests().to_pylist() if m["added_snapshot_id"] == snap.snapshot_id
    ]
    with open(manifest["path"].removeprefix("file://"), "rb") as f:
        assert fastavro.reader(f).metadata["format-version"] == str(new)
    metadata_dir = Path(fresh.location.removeprefix("file://"), "metadata")
    referenced = {p.removeprefix("file://") for p in referenced_files(fresh)}
    assert {str(p) for p in metadata_dir.glob("*-m*.avro")} <= referenced  # the first attempt's deleted


def test_a_commit_on_a_manifest_list_read_as_empty_is_refused(tmp_path: Path) -> None:
    """The new snapshot listed only its own file: every earlier file dropped from the table."""
    from gpu_engine.errors import ManifestError

    from .test_expire import _empty_current_manifest_list

    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", schema=pa.schema([("id", pa.int64())]), properties={"format-version": "2"})
    tbl.append(pa.table({"id": [1, 2]}))
    _empty_current_manifest_list(tbl)
    location = tbl.metadata_location
    with pytest.raises(ManifestError, match="truncated or inconsistent"):
        tbl.append(pa.table({"id": [3]}))
    with pytest.raises(ManifestError, match="truncated or inconsistent"):
        tbl.inspect.files()
    assert cat.load_table("db.t").metadata_location == location


def _registered(tmp_path: Path, **changes: Any) -> tuple[Table, ContentFile, int]:
    """A table of one appended row, and a 1,000-row Parquet file of ten row groups to register with
    ``changes`` to its entry; the file's real size."""
    import dataclasses
    import os

    import pyarrow.parquet as pq

    cat = sql_catalog(tmp_path)
    data = pa.table({"id": pa.array(range(1000), pa.int64())})
    tbl = cat.create_table("db.r", schema=data.schema, properties={"format-version": "2"})
    template = tbl.append(data.slice(0, 1)).files[0]
    path = tmp_path / "added.parquet"
    pq.write_table(
        data.cast(pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])),
        path,
        row_group_size=100,
    )
    real = os.path.getsize(path)
    entry = dataclasses.replace(
        template, path=str(path), record_count=1000, file_size_in_bytes=real, split_offsets=None,
        lower_bounds={}, upper_bounds={}, value_counts={}, null_value_counts={}, column_sizes={},
    )  # fmt: skip
    return tbl, dataclasses.replace(entry, **changes), real


def test_a_recorded_size_smaller_than_the_file_reads_every_row_group(tmp_path: Path) -> None:
    """The whole-file task's byte range was the recorded size: the row groups past it were dropped without
    an error (701 of 1,001 rows), and a compaction made the loss permanent."""
    import dataclasses

    from gpu_engine.commit import SnapshotUpdate

    tbl, entry, real = _registered(tmp_path)
    entry = dataclasses.replace(entry, file_size_in_bytes=real // 2)
    tbl.commit(SnapshotUpdate.append([entry]))
    assert tbl.scan().to_arrow().num_rows == 1001
    tbl.compact(options={"rewrite-all": "true"})
    assert tbl.scan().to_arrow().num_rows == 1001


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"file_size_in_bytes": -1}, "file_size_in_bytes -1 is not a count"),
        ({"record_count": -5}, "record_count -5 is not a count"),
        ({"file_format": "CSV"}, "file_format 'CSV': expected one of"),
        ({"partition": None}, "partition None is not a tuple of the spec's values"),
    ],
)
def test_an_entry_readers_cannot_take_is_refused_naming_the_file(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    """Written as given: PyIceberg and Java refuse 'CSV'; a negative size read one row of 1,001; None as a
    partition failed with a bare TypeError."""
    from gpu_engine.commit import SnapshotUpdate
    from gpu_engine.errors import ManifestError

    tbl, entry, _ = _registered(tmp_path, **changes)
    location = tbl.metadata_location
    with pytest.raises(ManifestError, match=f"entry for .*added.parquet.*: {re.escape(message)}"):
        tbl.commit(SnapshotUpdate.append([entry]))
    assert tbl.refresh().metadata_location == location


def test_a_data_sequence_number_past_the_commit_is_refused(tmp_path: Path) -> None:
    """Files given sequence number 100 at snapshot 3: a delete committed later (4) did not apply to them."""
    from gpu_engine.commit import SnapshotUpdate
    from gpu_engine.errors import ValidationError

    tbl, entry, _ = _registered(tmp_path)
    with pytest.raises(ValidationError, match=r"data sequence number 100 .* past this commit's"):
        tbl.commit(SnapshotUpdate("append", (entry,), (), data_sequence_number=100))
    tbl.commit(
        SnapshotUpdate("append", (entry,), (), data_sequence_number=1)
    )  # an earlier one: as compaction
    tbl.delete_rows(pa.table({"id": pa.array([2], pa.int64())}), on=["id"])
    assert 2 not in tbl.scan().to_arrow()["id"].to_pylist()
