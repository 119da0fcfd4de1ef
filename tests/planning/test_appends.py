"""``Table.incremental_append_scan``: the rows the ``append`` snapshots of a range added, as appended
(Iceberg Java's ``IncrementalAppendScan``) — other operations passed over, no delete applied, files found
through the manifests the appends wrote even after later manifest rewrites; checked against DuckDB's and
PyIceberg's reads of each fixture snapshot and its parent."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine.errors import PlanningError, SnapshotNotFound
from gpu_engine.iceberg.manifest_list import ManifestFile
from gpu_engine.iceberg.metadata import TableMetadata
from gpu_engine.iceberg.snapshots import Snapshot
from gpu_engine.io.fileio import FileIO
from gpu_engine.planning import appends as appends_module
from gpu_engine.planning import snapshot_manifests
from gpu_engine.planning.appends import append_snapshots, appended_manifests
from gpu_engine.planning.snapshot_range import SnapshotRange
from gpu_engine.table import Table

from ..commit._support import assert_same_rows, region_table, rows
from ..execute.oracles import DUCKDB_CANNOT, KNOWN_WRONG, _rows, duckdb_rows
from ._support import MISSING, inventory, inventory_paths, load, missing_metadata_files, same_columns


def _head(tbl: Table) -> int:
    snapshot_id = tbl.metadata.current_snapshot_id
    assert snapshot_id is not None
    return snapshot_id


def test_appends_in_range_as_appended_other_operations_passed_over(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 30))
    start = _head(tbl)
    tbl.append(rows(30, 30, seed=1))
    tbl.delete("id < 40")  # a delete (merge-on-read): passed over, and its deletes do not apply
    tbl.overwrite(rows(500, 5, seed=2), "id = 45")  # an overwrite adds files, but is not an append
    tbl.append(rows(60, 20, seed=3))
    tbl.compact(options={"rewrite-all": "true"})  # a replace: passed over

    got = tbl.incremental_append_scan(start).to_arrow()
    assert_same_rows(got, pa.concat_tables([rows(30, 30, seed=1), rows(60, 20, seed=3)]), context="range")
    everything = tbl.incremental_append_scan().to_arrow()
    expected = pa.concat_tables([rows(0, 30), rows(30, 30, seed=1), rows(60, 20, seed=3)])
    assert_same_rows(everything, expected, context="from the first snapshot")
    assert tbl.incremental_append_scan(_head(tbl)).to_arrow().num_rows == 0  # empty range
    inclusive = tbl.incremental_append_scan(start, from_inclusive=True).to_arrow()
    assert_same_rows(inclusive, expected, context="inclusive start")


def test_end_snapshot_branch_filter_columns_and_limit(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 3)
    tbl.append(rows(0, 20))
    first = _head(tbl)
    tbl.append(rows(20, 20, seed=1))
    second = _head(tbl)
    tbl.append(rows(40, 20, seed=2))
    tbl.manage_snapshots().create_branch("audit", second).commit()
    tbl.append(rows(100, 7, seed=4), branch="audit")

    to_second = tbl.incremental_append_scan(first, to_snapshot_id=second).to_arrow()
    assert_same_rows(to_second, rows(20, 20, seed=1), context="to a snapshot")
    on_branch = tbl.incremental_append_scan(first, branch="audit").to_arrow()
    assert_same_rows(
        on_branch, pa.concat_tables([rows(20, 20, seed=1), rows(100, 7, seed=4)]), context="branch"
    )

    picked = tbl.incremental_append_scan(first, filter="region = 'eu'", columns=["id", "_row_id"]).to_arrow()
    later = pa.concat_tables([rows(20, 20, seed=1), rows(40, 20, seed=2)])
    eu = later.filter(pa.compute.equal(later["region"], "eu"))
    assert sorted(picked["id"].to_pylist()) == sorted(eu["id"].to_pylist())
    assert picked.column_names == ["id", "_row_id"] and picked["_row_id"].null_count == 0
    assert tbl.incremental_append_scan(first, limit=5).to_arrow().num_rows == 5

    with pytest.raises(PlanningError, match="not an ancestor"):
        tbl.incremental_append_scan(_head(tbl), branch="audit").to_arrow()
    with pytest.raises(SnapshotNotFound):
        tbl.incremental_append_scan(first, to_snapshot_id=123).to_arrow()
    # an end snapshot on a branch: one of its head's ancestors (Java's toSnapshot with useBranch)
    on_audit = tbl.incremental_append_scan(first, to_snapshot_id=second, branch="audit").to_arrow()
    assert_same_rows(on_audit, rows(20, 20, seed=1), context="to a snapshot of a branch")
    main_head = tbl.metadata.current_snapshot_id
    with pytest.raises(PlanningError, match=r"to_snapshot_id=\d+: not an ancestor of branch 'audit'"):
        tbl.incremental_append_scan(first, to_snapshot_id=main_head, branch="audit")
    # ids arrive as strings from JSON
    with pytest.raises(PlanningError, match=r"snapshot_id=.\d+.: expected an integer"):
        tbl.incremental_append_scan(first, to_snapshot_id=str(second)).to_arrow()  # type: ignore[arg-type]
    with pytest.raises(PlanningError, match=r"from_snapshot_id.*an integer"):
        tbl.incremental_append_scan(str(first)).to_arrow()  # type: ignore[arg-type]


def test_current_schema_and_rewritten_manifests(tmp_path: Path) -> None:
    tbl = region_table(
        tmp_path, 2, **{"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"}
    )
    tbl.append(rows(0, 10))
    start = _head(tbl)
    for i in range(1, 4):
        tbl.append(rows(i * 10, 10, seed=i))
    tbl.rewrite_manifests()  # every entry now EXISTING in manifests of a replace snapshot
    with tbl.update_schema() as update:
        update.add_column("note", "string")
        update.rename_column("s", "text")

    got = tbl.incremental_append_scan(start).to_arrow()
    assert got.column_names[-1] == "note" and got["note"].null_count == got.num_rows
    expected = pa.concat_tables([rows(i * 10, 10, seed=i) for i in range(1, 4)]).rename_columns(
        [c if c != "s" else "text" for c in rows(0, 0).column_names]
    )
    assert_same_rows(got.drop_columns(["note"]), expected, context="after manifest rewrite and schema change")


@pytest.mark.parametrize("counts", ["listed", "left out"])
def test_a_snapshot_without_an_operation_counts_when_it_only_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counts: str
) -> None:
    """The summary is optional in v1: such a snapshot is an append when the manifests it wrote add data
    files and delete none (read from the entries where the manifest list leaves the counts out)."""
    tbl = region_table(tmp_path, 1)
    tbl.append(rows(0, 5))
    tbl.append(rows(5, 5, seed=1))
    tbl.delete("id < 7")  # copy-on-write on v1: deletes entries and adds a rewritten file
    tbl.append(rows(10, 5, seed=2))
    md = tbl.metadata
    bare = replace(md, snapshots=tuple(replace(s, summary=None) for s in md.snapshots))
    head = bare.snapshot_by_id(_head(tbl))
    chain = list(reversed(bare.ancestor_ids(head.snapshot_id)))  # oldest first
    assert len(chain) == 4
    if counts == "left out":
        listed = snapshot_manifests.manifest_files

        def without_counts(md: TableMetadata, io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
            return [replace(m, deleted_files_count=None) for m in listed(md, io, snapshot)]

        monkeypatch.setattr(appends_module, "manifest_files", without_counts)
    chosen = [s.snapshot_id for s in append_snapshots(bare, tbl.io, head, SnapshotRange())]
    assert chosen == [chain[0], chain[1], chain[3]]  # the delete is passed over, as an overwrite is
    bare_table = Table(identifier=tbl.identifier, metadata=bare, metadata_location="", io=tbl.io)
    got = bare_table.incremental_append_scan(chain[0]).to_arrow()
    assert_same_rows(got, pa.concat_tables([rows(5, 5, seed=1), rows(10, 5, seed=2)]), context="no summaries")
    assert [s.snapshot_id for s in append_snapshots(md, tbl.io, head, SnapshotRange())] == chosen


def test_an_append_whose_manifests_disagree_with_its_summary_is_refused(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 10, seed=1))
    md = tbl.metadata
    head = md.snapshot_by_id(_head(tbl))
    files = int((head.summary or {})["added-data-files"])
    summary = {**(head.summary or {}), "added-data-files": str(files + 1)}
    tampered = replace(
        md, snapshots=tuple(s if s is not head else replace(s, summary=summary) for s in md.snapshots)
    )
    with pytest.raises(
        PlanningError,
        match=f"{head.snapshot_id} records added-data-files={files + 1} but the manifests it wrote add",
    ):
        appended_manifests(tampered, tbl.io, tampered.snapshot_by_id(head.snapshot_id), SnapshotRange())


def _append_tables() -> list[str]:
    """Fixture tables with an ``append`` snapshot whose parent is still readable."""
    if MISSING in inventory_paths():
        return [MISSING]
    return sorted(rel for rel, entry in inventory().items() if entry.get("snapshots", 0) >= 2)


@pytest.mark.parametrize("rel", _append_tables())
def test_each_fixture_append_adds_what_duckdb_sees_added(rel: str) -> None:
    if rel == MISSING:
        pytest.fail("fixtures missing")
    if rel in DUCKDB_CANNOT or ("duckdb", rel) in KNOWN_WRONG:
        pytest.skip(f"DuckDB cannot read {rel}")
    tbl = load(rel)
    md = tbl.metadata
    checked = 0
    for snapshot in md.snapshots:
        parent = snapshot.parent_snapshot_id
        if snapshot.operation != "append" or parent is None or parent not in md.snapshots_by_id:
            continue
        if missing_metadata_files(tbl, snapshot) or missing_metadata_files(tbl, md.snapshot_by_id(parent)):
            continue
        sid = snapshot.snapshot_id
        names = same_columns(md, sid, parent)
        ours = tbl.incremental_append_scan(parent, to_snapshot_id=sid).to_arrow().select(names)
        after, before = duckdb_rows(rel, sid).select(names), duckdb_rows(rel, parent).select(names)
        added = Counter(_rows(after, names, ours)) - Counter(_rows(before, names, ours))
        assert not Counter(_rows(before, names, ours)) - Counter(_rows(after, names, ours)), f"{rel}@{sid}"
        assert Counter(_rows(ours, names, after)) == added, f"{rel}@{sid}: appended rows differ from DuckDB's"
        checked += 1
    if not checked:
        pytest.skip(f"{rel}: no append snapshot with a readable parent")
