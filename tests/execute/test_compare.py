"""A data file read once with two snapshots' deletes gives exactly the rows alive in the first and not in
the second, and the positions alive in the second and not in the first, as scans of the two snapshots
see them: deletion vectors in both directions, position and equality deletes, residuals, and files
split into row groups across workers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.execute.compare import FilePair, compare
from gpu_engine.execute.projection import project
from gpu_engine.table import Table
from gpu_engine.tasks import ScanTask

from ..commit._support import sql_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])


def _table(tmp_path: Path, version: int, **props: str) -> Table:
    properties = {"format-version": str(version), "write.delete.mode": "merge-on-read", **props}
    return sql_catalog(tmp_path).create_table(
        "db.t", SCHEMA, partition_spec=["region"], properties=properties
    )


def _current(tbl: Table) -> int:
    snapshot_id = tbl.metadata.current_snapshot_id
    assert snapshot_id is not None
    return snapshot_id


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "region": ["eu" if i % 3 else "us" for i in ids]}, schema=SCHEMA)


def _tasks(tbl: Table, snapshot_id: int, where: str) -> dict[str, ScanTask]:
    out = {}
    for t in tbl.scan(snapshot_id=snapshot_id, filter=where).plan().tasks:
        assert t.file.path not in out, "one task per file in these tests"
        out[t.file.path] = t
    return out


def _alive(tbl: Table, snapshot_id: int, where: str) -> set[tuple[str, int, int]]:
    rows = tbl.scan(snapshot_id=snapshot_id, filter=where, columns=["_file", "_pos", "id"]).to_arrow()
    return set(zip(rows["_file"].to_pylist(), rows["_pos"].to_pylist(), rows["id"].to_pylist(), strict=True))


def _check(
    tbl: Table, old: int, new: int, where: str = "true", workers: int = 2, backend: str = "cpu"
) -> tuple[int, int]:
    """Compare every file live in both snapshots against the two scans; how many rows went and came."""
    before, after = _tasks(tbl, old, where), _tasks(tbl, new, where)
    pairs = [FilePair(before[p], after[p]) for p in sorted(before.keys() & after.keys())]
    assert pairs
    md = tbl.metadata
    projection = project(md, md.schema, ["id", "_pos", "_file"])
    _, diffs = compare(md, tbl.io, md.schema, pairs, projection, backend=backend, workers=workers)
    gone: set[tuple[str, int, int]] = set()
    again: set[tuple[str, int]] = set()
    for d in diffs:
        rows = d.gone
        gone |= set(
            zip(rows["_file"].to_pylist(), rows["_pos"].to_pylist(), rows["id"].to_pylist(), strict=True)
        )
        again |= {(d.path, int(p)) for p in d.again}
    shared = set(before.keys() & after.keys())
    was = {r for r in _alive(tbl, old, where) if r[0] in shared}
    now = {r for r in _alive(tbl, new, where) if r[0] in shared}
    assert gone == was - now
    assert again == {(f, p) for f, p, _ in now - was}
    return len(gone), len(again)


@pytest.mark.parametrize("version", [2, 3])
def test_position_deletes_and_dvs_both_ways(tmp_path: Path, version: int, backend: str) -> None:
    tbl = _table(tmp_path, version)
    tbl.append(_rows(0, 60))
    tbl.delete("id in (1, 2, 4)")
    old = _current(tbl)
    tbl.delete("id in (5, 7, 8, 40)")
    new = _current(tbl)
    assert _check(tbl, old, new, backend=backend) == (4, 0)
    assert _check(tbl, new, old, backend=backend) == (0, 4)  # the later deletes, undone
    assert _check(tbl, old, new, where="id < 30", backend=backend) == (3, 0)  # the residual: both sides


def test_equality_deletes_with_filters(tmp_path: Path, backend: str) -> None:
    tbl = _table(tmp_path, 2)
    for start in (0, 30, 60):
        tbl.append(_rows(start, 30))
    old = _current(tbl)
    keys = _rows(0, 90).filter(pc.is_in(_rows(0, 90)["id"], pa.array([3, 33, 63, 64], pa.int64())))
    tbl.delete_rows(keys, on=["id", "region"])
    tbl.delete("id = 10")
    new = _current(tbl)
    assert _check(tbl, old, new, backend=backend) == (5, 0)
    assert _check(tbl, new, old, backend=backend) == (0, 5)
    assert _check(tbl, old, new, where="id > 32", backend=backend) == (3, 0)


def test_a_file_split_into_row_groups_across_workers(tmp_path: Path) -> None:
    tbl = _table(tmp_path, 3, **{"write.parquet.row-group-size-bytes": "2000"})
    tbl.append(_rows(0, 3000).filter(pc.equal(_rows(0, 3000)["region"], "eu")))
    (task,) = tbl.scan().plan().tasks
    assert len(task.file.split_offsets or ()) >= 3
    old = _current(tbl)
    gone = [i for i in range(1, 3000, 7) if i % 3]
    tbl.delete(f"id in ({', '.join(map(str, gone))})")
    new = _current(tbl)
    assert _check(tbl, old, new, workers=4) == _check(tbl, old, new, workers=1) == (len(gone), 0)
    assert _check(tbl, new, old, workers=4) == (0, len(gone))  # positions past the first row group
