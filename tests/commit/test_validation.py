"""What validation reads: only the snapshots since the plan that can conflict (not appends, not the same
job's earlier commits), each manifest once; what it must still catch is in test_compact_races and
test_conflicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.errors import ValidationError
from gpu_engine.iceberg.manifests import read_manifest
from gpu_engine.table import Table
from tests.commit._support import sql_catalog

import gpu_engine.commit.validation as validation  # isort: skip


def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = read_manifest

    def read(m: Any, **kwargs: Any) -> Any:
        reads.append(m.manifest_path)
        return real(m, **kwargs)

    monkeypatch.setattr("gpu_engine.commit.validation.read_manifest", read)
    return reads


def partitioned(tmp_path: Path, partitions: int) -> Table:
    cat = sql_catalog(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("p", pa.int64())])
    tbl = cat.create_table("db.t", schema=schema, partition_spec=["p"], properties={"format-version": "2"})
    for i in range(partitions):  # one file per partition: one file group per partition
        tbl.append(pa.table({"id": [i, i + 1], "p": [i, i]}))
    return tbl


def test_partial_progress_commits_do_not_revalidate_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each group commit of a partial-progress compaction validated every earlier one, reading their
    manifests twice (a quadratic cost: 100 commits took 22 s)."""
    tbl = partitioned(tmp_path, 12)
    reads = counted_reads(monkeypatch)
    options = {"min-input-files": "1", "rewrite-all": "true", "partial-progress.enabled": "true"}
    result = tbl.compact(options={**options, "partial-progress.max-commits": "100"})
    assert len(result.commits) == 12 and result.rewritten_data_files == 12
    assert reads == []
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == sorted(i + d for i in range(12) for d in (0, 1))


def test_appends_since_the_plan_are_not_read_but_deletes_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends add data files only (the spec's append): nothing in them conflicts. A delete since the
    plan is read, and still fails the planned delete of the same file."""
    tbl = partitioned(tmp_path, 2)
    other = sql_catalog(tmp_path).load_table("db.t")
    planned = tbl.metadata.current_snapshot_id
    assert planned is not None
    for i in range(5):
        other.append(pa.table({"id": [100 + i], "p": [0]}))
    reads = counted_reads(monkeypatch)
    target = frozenset(f["file_path"] for f in tbl.inspect.files().to_pylist() if f["partition"]["p"] == 0)
    other.refresh()
    validation.validate_no_new_deletes(other.io, other.metadata, "main", planned, target, action="this test")
    assert reads == []
    other.delete("p = 0 and id = 0")
    other.refresh()
    with pytest.raises(ValidationError, match="added deletes"):
        validation.validate_no_new_deletes(other.io, other.metadata, "main", planned, target, action="x")
    assert len(reads) >= 1
