"""A scan reads each delete file once, however many data files it applies to: also equality delete files
whose data files carry different sets of them (Flink-style upserts, where each data file is deleted from
by every later commit), partition-scoped and global ones together, with exactly the rows that survive."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.execute import changelog as changelog_execution
from gpu_engine.execute.delete_cache import DeleteCache
from gpu_engine.io import fileio
from gpu_engine.table import Table

from ..commit._support import count_opens, sql_catalog

SCHEMA = pa.schema(
    [pa.field("region", pa.string()), pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())]
)
Oracle = dict[tuple[str, int], int]


def _upsert(tbl: Table, oracle: Oracle, region: str, ids: np.ndarray, v: int) -> None:
    rows = [{"region": region, "id": int(i), "v": v} for i in ids]
    tbl.upsert(pa.Table.from_pylist(rows, schema=SCHEMA), on=["region", "id"])
    oracle.update({(region, int(i)): v for i in ids})


def _scan_counting_opens(
    tbl: Table, backend: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[pa.Table, Counter[str]]:
    with monkeypatch.context() as m:
        opened = count_opens(m)
        result = tbl.scan(backend=backend).to_arrow()
    return result, opened


def _check(tbl: Table, oracle: Oracle, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = tbl.scan().plan()
    equality = {d.path for t in plan.tasks for d in t.deletes if d.kind == "equality"}
    carried = {frozenset(d.path for d in t.deletes) for t in plan.tasks}
    assert len(equality) >= 6 and len(carried) >= 4  # data files carry different sets of delete files
    result, opened = _scan_counting_opens(tbl, backend, monkeypatch)
    assert {p: opened[fileio.local_path(p)] for p in equality} == dict.fromkeys(equality, 1)
    got = Counter(zip(*(result.column(c).to_pylist() for c in SCHEMA.names), strict=True))
    assert got == Counter((r, i, v) for (r, i), v in oracle.items())


def _upsert_rounds(tbl: Table, rng: np.random.Generator, versions: range, *, keys: int, size: int) -> Oracle:
    """Upserts of ``size`` of ``keys`` ids per region and version; the rows they leave."""
    oracle: Oracle = {}
    for v in versions:
        for region in ("eu", "us"):
            _upsert(tbl, oracle, region, rng.choice(keys, size, replace=False), v)
    return oracle


def _by_region(tmp_path: Path) -> Table:
    return sql_catalog(tmp_path).create_table(
        "db.t", SCHEMA, partition_spec=["region"], properties={"format-version": "2"}
    )


def test_upserts_read_each_equality_delete_file_once(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _by_region(tmp_path)
    oracle = _upsert_rounds(tbl, np.random.default_rng(5), range(8), keys=40, size=12)
    _check(tbl, oracle, backend, monkeypatch)


def test_global_and_partition_equality_deletes_read_once(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deletes of an unpartitioned spec apply to every partition; those of a partition to it only."""
    tbl, rng = _by_region(tmp_path), np.random.default_rng(9)
    oracle = _upsert_rounds(tbl, rng, range(3), keys=20, size=8)
    with tbl.update_spec() as u:
        u.remove_field("region")
    for v in range(3, 6):
        _upsert(tbl, oracle, "eu", rng.choice(20, 8, replace=False), v)
        gone = set(rng.choice(20, 3, replace=False).tolist())
        tbl.delete_rows(pa.table({"id": pa.array(sorted(gone), pa.int64())}), on=["id"])  # every region
        oracle = {k: x for k, x in oracle.items() if k[1] not in gone}
    assert {d.spec_id for t in tbl.scan().plan().tasks for d in t.deletes} == {0, 1}
    _check(tbl, oracle, backend, monkeypatch)


def _equality_files(tbl: Table) -> set[str]:
    return {
        fileio.local_path(d.path) for t in tbl.scan().plan().tasks for d in t.deletes if d.kind == "equality"
    }


def test_a_changelog_reads_each_delete_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every snapshot's two sides share what they load with the next snapshot's; the changes
    are those of executions that keep nothing."""
    tbl = _by_region(tmp_path)
    _upsert_rounds(tbl, np.random.default_rng(3), range(6), keys=40, size=12)
    first = tbl.metadata.snapshots[0].snapshot_id
    with monkeypatch.context() as m:
        m.setattr(changelog_execution, "DeleteCache", lambda: DeleteCache(max_total_bytes=0))
        expected = tbl.incremental_changelog_scan(first).to_arrow()
    opened = count_opens(monkeypatch)
    got = tbl.incremental_changelog_scan(first).to_arrow()
    assert got.to_pylist() == expected.to_pylist() and got.num_rows > 100
    equality = _equality_files(tbl)
    assert len(equality) >= 10
    assert {p: opened[p] for p in equality} == dict.fromkeys(equality, 1)


def test_compaction_groups_read_each_delete_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = _by_region(tmp_path)
    oracle = _upsert_rounds(tbl, np.random.default_rng(4), range(6), keys=40, size=12)
    equality = _equality_files(tbl)
    opened = count_opens(monkeypatch)
    options = {
        "rewrite-all": "true",
        "max-file-group-size-bytes": "4000",
        "max-concurrent-file-group-rewrites": "1",
    }
    result = tbl.compact(options=options)
    assert len(result.groups) >= 4  # several groups per partition, each under the partition's deletes
    assert {p: opened[p] for p in equality} == dict.fromkeys(equality, 1)
    rows = tbl.scan().to_arrow()
    got = Counter(zip(*(rows.column(c).to_pylist() for c in SCHEMA.names), strict=True))
    assert got == Counter((r, i, v) for (r, i), v in oracle.items())


@pytest.mark.parametrize("version", [2, 3])
def test_a_changelog_reads_each_position_delete_once(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Position delete files (v2) and deletion vectors (v3, one read per blob) are kept too."""
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", SCHEMA, partition_spec=["region"],
        properties={"format-version": str(version), "write.delete.mode": "merge-on-read"},
    )  # fmt: skip
    for start in range(0, 60, 20):
        ids = pa.array(range(start, start + 20), pa.int64())
        tbl.append(pa.table({"region": ["eu", "us"] * 10, "id": ids, "v": ids}, schema=SCHEMA))
    for low in (0, 20, 40, 5, 25):
        tbl.delete(f"id >= {low} and id < {low + 3}")
    first = tbl.metadata.snapshots[0].snapshot_id
    with monkeypatch.context() as m:
        m.setattr(changelog_execution, "DeleteCache", lambda: DeleteCache(max_total_bytes=0))
        expected = tbl.incremental_changelog_scan(first).to_arrow()
    kept = {
        (fileio.local_path(d.path), d.content_offset)
        for s in tbl.metadata.snapshots
        for t in tbl.scan(snapshot_id=s.snapshot_id).plan().tasks
        for d in t.deletes
    }
    blobs = Counter(path for path, _ in kept)  # reads per file: one per blob
    assert len(blobs) >= 4
    opened = count_opens(monkeypatch)
    got = tbl.incremental_changelog_scan(first).to_arrow()
    assert got.to_pylist() == expected.to_pylist() and got.num_rows >= 15
    assert {p: opened[p] for p in blobs} == dict(blobs)
