"""A commit that removes files reads only the parent's manifests that can list them: those of the removed
files' content and partition spec. A removed file outside the kinds it is said to be in fails the commit
loudly (never a silent keep), and a compaction of a Flink-style table reads no delete manifest back."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.commit import manifest_set
from gpu_engine.commit.entries import snapshot_manifests
from gpu_engine.commit.removal_scope import RemovalScope
from gpu_engine.commit.update import SnapshotUpdate
from gpu_engine.errors import ValidationError
from gpu_engine.iceberg.manifest_list import ManifestFile
from gpu_engine.iceberg.manifests import read_manifest
from gpu_engine.table import Table

from ._support import sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _upserted(tmp_path: Path, rounds: int) -> Table:
    tbl = sql_catalog(tmp_path).create_table("db.t", SCHEMA, properties={"format-version": "2"})
    rng = np.random.default_rng(11)
    for v in range(rounds):
        ids = pa.array(rng.choice(40, 10, replace=False), pa.int64())
        tbl.upsert(pa.table({"id": ids, "v": pa.array([v] * 10, pa.int64())}), on=["id"])
    return tbl


def _manifests(tbl: Table) -> list[ManifestFile]:
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None
    return list(snapshot_manifests(tbl.io, snapshot))


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    reads: Counter[str] = Counter()
    original = read_manifest

    def counting(m: ManifestFile, **kwargs: Any) -> pa.Table:
        reads[m.manifest_path] += 1
        return original(m, **kwargs)

    monkeypatch.setattr(manifest_set, "read_manifest", counting)
    return reads


def test_manifests_of_other_kinds_are_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tbl = _upserted(tmp_path, 4)
    manifests = _manifests(tbl)
    deletes = {tbl.io.resolve(m.manifest_path) for m in manifests if m.content == 1}
    assert len(deletes) >= 3
    victim = tbl.scan().plan().tasks[0].file
    reads = _counting_reads(monkeypatch)
    tbl.commit(
        SnapshotUpdate(
            "delete", removed=[victim.path], removed_from=RemovalScope.of_kinds([("data", victim.spec_id)])
        )
    )
    assert reads and not set(reads) & deletes
    assert victim.path not in {t.file.path for t in tbl.scan().plan().tasks}
    assert {m.manifest_path for m in _manifests(tbl) if m.content == 1} >= {
        m.manifest_path for m in manifests if m.content == 1
    }  # the delete manifests kept as they were


def test_a_removed_file_outside_its_given_kinds_fails_the_commit(tmp_path: Path) -> None:
    tbl = _upserted(tmp_path, 2)
    before = tbl.metadata.current_snapshot_id
    victim = tbl.scan().plan().tasks[0].file
    with pytest.raises(ValidationError, match="not live"):
        tbl.commit(
            SnapshotUpdate(
                "delete",
                removed=[victim.path],
                removed_from=RemovalScope.of_kinds([("deletes", victim.spec_id)]),
            )
        )
    with pytest.raises(ValidationError, match="not live"):
        tbl.commit(
            SnapshotUpdate(
                "delete",
                removed=[victim.path],
                removed_from=RemovalScope.of_kinds([("data", victim.spec_id + 1)]),
            )
        )
    assert tbl.metadata.current_snapshot_id == before


def test_a_compaction_reads_no_delete_manifest_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Equality deletes stay after a compaction: its commit has no delete file to remove."""
    tbl = _upserted(tmp_path, 5)
    rows = sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    deletes = {tbl.io.resolve(m.manifest_path) for m in _manifests(tbl) if m.content == 1}
    reads = _counting_reads(monkeypatch)
    result = tbl.compact(options={"rewrite-all": "true"})
    assert result.rewritten_data_files >= 5 and reads
    assert not set(reads) & deletes
    assert sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == rows


@pytest.mark.parametrize("version", [2, 3])
def test_rewriting_deletes_reads_no_data_manifest(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Position delete rewrites and equality delete conversions remove delete files only."""
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", SCHEMA, properties={"format-version": str(version), "write.delete.mode": "merge-on-read"}
    )
    for start in range(0, 40, 10):
        tbl.append(
            pa.table({"id": pa.array(range(start, start + 10), pa.int64()), "v": [0] * 10}, schema=SCHEMA)
        )
    for i in (1, 2, 11, 21):
        tbl.delete(f"id = {i}")
    tbl.delete_rows(pa.table({"id": pa.array([5, 15], pa.int64())}), on=["id"])
    rows = sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    reads = _counting_reads(monkeypatch)
    every = partial(tbl.rewrite_position_deletes, options={"rewrite-all": "true"})
    for rewrite in (every, tbl.convert_equality_deletes):
        data = {tbl.io.resolve(m.manifest_path) for m in _manifests(tbl) if m.content == 0}
        reads.clear()
        assert rewrite().removed_delete_files and reads
        assert not set(reads) & data
    assert sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == rows


def test_copy_on_write_deletes_and_overwrites_read_no_delete_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They remove data files only (the rewritten ones)."""
    tbl = _upserted(tmp_path, 4)
    tbl.update_properties().set("write.delete.mode", "copy-on-write").commit()
    deletes = {tbl.io.resolve(m.manifest_path) for m in _manifests(tbl) if m.content == 1}
    live = sorted(tbl.scan().to_arrow()["id"].to_pylist())
    reads = _counting_reads(monkeypatch)
    assert tbl.delete(f"id = {live[0]}").removed_data_files and reads
    assert not set(reads) & deletes
    reads.clear()
    changed = pa.table({"id": pa.array([live[1]], pa.int64()), "v": pa.array([99], pa.int64())})
    assert tbl.overwrite(changed, f"id = {live[1]}").removed_data_files and reads
    assert not set(reads) & deletes
    rows = {r["id"]: r["v"] for r in tbl.scan().to_arrow().to_pylist()}
    assert live[0] not in rows and rows[live[1]] == 99 and sorted(rows) == live[1:]


def test_a_partition_overwrite_reads_no_delete_manifest_when_its_partitions_have_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", schema, partition_spec=["region"], properties={"format-version": "2"}
    )
    for start in (0, 10):
        tbl.append(pa.table({"id": range(start, start + 10), "region": ["eu", "us"] * 5}, schema=schema))
    tbl.delete_rows(
        pa.table({"id": pa.array([1, 3], pa.int64()), "region": ["us", "us"]}), on=["id", "region"]
    )
    deletes = {tbl.io.resolve(m.manifest_path) for m in _manifests(tbl) if m.content == 1}
    assert deletes
    reads = _counting_reads(monkeypatch)
    result = tbl.dynamic_partition_overwrite(pa.table({"id": [100], "region": ["eu"]}, schema=schema))
    assert result is not None and len(result.removed_data_files) == 2 and reads
    assert not set(reads) & deletes
    rows = sorted((r["region"], r["id"]) for r in tbl.scan().to_arrow().to_pylist())
    us = [("us", i) for i in range(20) if i % 2 and i not in (1, 3)]
    assert rows == [("eu", 100), *us]


def test_manifests_left_with_deleted_entries_only_are_not_carried_on(tmp_path: Path) -> None:
    """As Java's producers: a manifest that an earlier commit left holding DELETED entries only is history;
    the next snapshot lists only manifests with live files (or its own)."""
    tbl = sql_catalog(tmp_path).create_table(
        "db.d", SCHEMA, properties={"commit.manifest-merge.enabled": "false"}
    )
    for v in range(3):
        tbl.append(pa.table({"id": pa.array([v], pa.int64()), "v": pa.array([v], pa.int64())}))
    tbl.compact(options={"rewrite-all": "true"})
    emptied = [m for m in _manifests(tbl) if not m.has_added_files() and not m.has_existing_files()]
    assert len(emptied) == 3  # the compaction's own: its removals, recorded as DELETED entries
    tbl.append(pa.table({"id": pa.array([9], pa.int64()), "v": pa.array([9], pa.int64())}))
    now = _manifests(tbl)
    assert not {m.manifest_path for m in emptied} & {m.manifest_path for m in now}
    assert len(now) == 2 and sorted(tbl.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 9]
