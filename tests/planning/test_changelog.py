"""Changelog planning: which files change per snapshot (added, removed, deletes changed), replace
snapshots passed over, and each manifest read once however many snapshots list it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_engine.iceberg import manifests as mf
from gpu_engine.iceberg.manifest_list import ManifestFile
from gpu_engine.planning.changelog import change_counts, plan_changelog
from gpu_engine.planning.scan import ScanOptions
from gpu_engine.planning.snapshot_range import SnapshotRange

from ..commit._support import listed, region_table, rows


def test_files_per_snapshot_and_replace_passed_over(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 30))
    tbl.append(rows(30, 30, seed=1))
    tbl.delete("id < 3")
    tbl.compact(options={"rewrite-all": "true"})
    md = tbl.metadata
    plan = plan_changelog(md, tbl.io, ScanOptions(), SnapshotRange())
    ids = list(reversed(md.ancestor_ids(md.current_snapshot_id or 0)))
    assert plan.snapshot_ids == tuple(ids[:3]) and plan.skipped == (ids[3],)
    by = {sid: change_counts([t for t in plan.tasks if t.snapshot_id == sid]) for sid in plan.snapshot_ids}
    regions = len({t.path for t in plan.tasks if t.snapshot_id == ids[0]})
    assert by[ids[0]] == {"added": regions, "removed": 0, "changed": 0}
    assert by[ids[2]]["added"] == by[ids[2]]["removed"] == 0 and by[ids[2]]["changed"] >= 1
    assert [t.ordinal for t in plan.tasks] == sorted(t.ordinal for t in plan.tasks)


def test_each_manifest_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tbl = region_table(tmp_path, 2, **{"commit.manifest-merge.enabled": "false"})
    for i in range(6):
        tbl.append(rows(i * 10, 10, seed=i))
    reads: list[str] = []
    real = mf.read_manifest

    def counting(manifest: ManifestFile, **kwargs: object) -> object:
        reads.append(manifest.manifest_path)
        return real(manifest, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mf, "read_manifest", counting)
    plan = plan_changelog(tbl.metadata, tbl.io, ScanOptions(), SnapshotRange())
    assert len(plan.snapshot_ids) == 6
    assert sorted(reads) == sorted({m.manifest_path for m in listed(tbl)})  # 6 manifests, not 1 + 2 + ... + 6


def test_an_equality_delete_changes_only_files_its_keys_may_match(tmp_path: Path) -> None:
    """Without the equality-delete pruning every older file of the delete's partition would count as
    changed (and be read twice); with it, only files whose id range holds a deleted key."""
    tbl = region_table(tmp_path, 2)
    for i in range(4):
        tbl.append(rows(i * 100, 100, seed=i))
    keys = rows(100, 100, seed=1).slice(50, 2).select(["id", "region"])  # ids 150 and 151
    tbl.delete_rows(keys, on=["id", "region"])
    md = tbl.metadata
    plan = plan_changelog(md, tbl.io, ScanOptions(), SnapshotRange())
    second, last = plan.snapshot_ids[1], plan.snapshot_ids[-1]
    regions = set(keys.column("region").to_pylist())
    # the second append's files in the keys' regions: the only ones whose id range (100..199) holds a key
    expected = {
        t.path for t in plan.tasks if t.snapshot_id == second and t.after[0].file.partition[0] in regions
    }
    assert len(expected) == len(regions)
    changed = [t for t in plan.tasks if t.snapshot_id == last]
    assert all(t.changed for t in changed)
    assert {t.path for t in changed} == expected
    got = tbl.incremental_changelog_scan(plan.snapshot_ids[-2]).to_arrow()
    assert sorted(got.column("id").to_pylist()) == [150, 151]
    assert set(got.column("_change_type").to_pylist()) == {"DELETE"}


def test_an_append_is_planned_as_its_added_files_exactly_as_a_full_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends are planned from their own manifests, not as a plan of the whole table each (a changelog
    over N appends planned N tables); the tasks are those of full plans of each snapshot, deletes and
    residuals included, in a history of appends between deletes."""
    from gpu_engine.planning import changelog
    from gpu_engine.planning.scan import plan_snapshot

    tbl = region_table(tmp_path, 2)
    for i in range(3):
        tbl.append(rows(i * 40, 40, seed=i))
    tbl.delete("id in (3, 17, 44, 90, 101)")
    tbl.delete_rows(rows(0, 120).slice(10, 5).select(["id", "region"]), on=["id", "region"])
    for i in range(3, 6):
        tbl.append(rows(i * 40, 40, seed=i))
    md = tbl.metadata
    plan = plan_changelog(md, tbl.io, ScanOptions(), SnapshotRange())

    full = {}
    for sid in plan.snapshot_ids:
        snap = md.snapshots_by_id[sid]
        full[sid] = changelog._by_file(plan_snapshot(md, tbl.io, snap, md.schema, plan.filter).tasks)
    for task in plan.tasks:
        snap = md.snapshots_by_id[task.snapshot_id]
        assert task.after == full[task.snapshot_id].get(task.path, ())
        if snap.parent_snapshot_id in full:
            assert task.before == full[snap.parent_snapshot_id].get(task.path, ())
    appends = [
        md.snapshots_by_id[sid] for sid in plan.snapshot_ids if md.snapshots_by_id[sid].operation == "append"
    ]
    assert sum(t.added for t in plan.tasks) == sum(
        int((s.summary or {})["added-data-files"]) for s in appends
    )
    assert len(appends) == 6

    planned: list[int] = []
    real = plan_snapshot

    def counting(md: object, io: object, snapshot: object, *args: object) -> object:
        planned.append(1)
        return real(md, io, snapshot, *args)  # type: ignore[arg-type]

    monkeypatch.setattr("gpu_engine.planning.changelog.plan_snapshot", counting)
    plan_changelog(md, tbl.io, ScanOptions(), SnapshotRange())
    assert len(planned) == 2  # the two deletes; none of the six appends
