"""Manifest merging on commit (``commit.manifest-merge.*``, Iceberg Java's rules): small commits add a
manifest each until ``min-count-to-merge`` pile up, then one commit merges them; merged entries keep their
snapshot ids, sequence numbers and row ids; rows stay the same for every reader; nothing is left behind.

Manifests are inspected with fastavro, independently of our manifest reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

from gpu_engine.commit import manifest_merge
from gpu_engine.commit.manifest_merge import MergePolicy, _pack_end
from gpu_engine.errors import InvalidProperty
from gpu_engine.iceberg.manifest_list import ManifestFile
from gpu_engine.table import Table

from ._support import (
    CATALOG_NAME,
    FAST,
    assert_all_readers,
    avro_entries,
    listed,
    raise_at,
    referenced_files,
    rows,
    sql_catalog,
    table_files,
)

ADDED, EXISTING, DELETED = 1, 0, 2


def make(tmp_path: Path, version: int, **props: str) -> Table:
    cat = sql_catalog(tmp_path)
    properties = {"format-version": str(version), **FAST, **props}
    return cat.create_table("db.t", rows(0, 0).schema, properties=properties)


def appends(tbl: Table, count: int, size: int = 10) -> pa.Table:
    batches = [rows(i * size, size, seed=i) for i in range(count)]
    for b in batches:
        tbl.append(b)
    return pa.concat_tables(batches)


def test_policy_reads_icebergs_properties() -> None:
    assert MergePolicy.from_properties({}) == MergePolicy(True, 100, 8 * 1024 * 1024)
    props = {
        "commit.manifest-merge.enabled": "FALSE",
        "commit.manifest.min-count-to-merge": "7",
        "commit.manifest.target-size-bytes": "1024",
    }
    assert MergePolicy.from_properties(props) == MergePolicy(False, 7, 1024)
    for name, bad in [
        ("commit.manifest-merge.enabled", "yes"),
        ("commit.manifest.min-count-to-merge", "-1"),
        ("commit.manifest.target-size-bytes", "0"),
        ("commit.manifest.target-size-bytes", "8MB"),
    ]:
        with pytest.raises(InvalidProperty, match=name):
            MergePolicy.from_properties({name: bad})


def _m(name: str, length: int) -> ManifestFile:
    return ManifestFile(name, length, 0, 0, 1, 1, 1)


def test_bins_are_cut_from_the_oldest_end() -> None:
    """Java's packEnd: the oldest manifests fill whole bins, the newest bin is the partial one."""
    group = [_m("new", 10), _m("a", 90), _m("b", 10)]
    assert [[m.manifest_path for m in b] for b in _pack_end(group, 100)] == [["new"], ["a", "b"]]
    group = [_m("new", 10), _m("a", 40), _m("b", 50), _m("c", 60), _m("d", 30)]
    assert [[m.manifest_path for m in b] for b in _pack_end(group, 100)] == [["new", "a", "b"], ["c", "d"]]
    assert _pack_end([_m("huge", 500), _m("x", 1)], 100) == [[_m("huge", 500)], [_m("x", 1)]]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_appends_merge_once_min_count_manifests_pile_up(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version, **{"commit.manifest.min-count-to-merge": "4"})
    data = appends(tbl, 3)
    assert len(listed(tbl)) == 3  # below the count: one manifest per append ("fast append")
    ids_before = _ids_by_file(tbl)
    before = listed(tbl)
    lineage = (
        tbl.scan(columns=["id", "_row_id", "_last_updated_sequence_number"]).to_arrow()
        if version == 3
        else None
    )
    fourth = rows(30, 10, seed=3)
    result = tbl.append(fourth).commit
    assert result is not None
    data = pa.concat_tables([data, fourth])
    (merged,) = listed(tbl)
    assert merged.added_snapshot_id == result.snapshot_id
    s = result.summary
    assert (s["manifests-created"], s["manifests-kept"], s["manifests-replaced"]) == ("1", "0", "3")
    assert s["entries-processed"] == "4"
    entries = avro_entries(merged.manifest_path)
    assert len(entries) == 4
    by_path = {e["data_file"]["file_path"]: e for e in entries}
    for m in before:
        for old in avro_entries(m.manifest_path):
            e = by_path[old["data_file"]["file_path"]]
            assert e["status"] == EXISTING and e["snapshot_id"] == m.added_snapshot_id
            if version >= 2:  # explicit, equal to what the old entry inherited
                assert e["sequence_number"] == e["file_sequence_number"] == m.sequence_number
    (new,) = [e for e in entries if e["status"] == ADDED]
    assert new["snapshot_id"] == result.snapshot_id
    if version >= 2:
        assert new["sequence_number"] is None and new["file_sequence_number"] is None  # inherited
    assert _ids_by_file(tbl) == {**ids_before, new["data_file"]["file_path"]: list(range(30, 40))}
    assert_all_readers(tbl, data)
    if version == 3:
        assert lineage is not None
        after = tbl.scan(columns=["id", "_row_id", "_last_updated_sequence_number"]).to_arrow()
        kept = after.filter(pc.less(after.column("id"), 30)).sort_by("id")
        assert kept.equals(lineage.sort_by("id"))  # old rows keep their ids and sequence numbers
        new_ids = after.filter(pc.greater_equal(after.column("id"), 30)).column("_row_id").to_pylist()
        assert len(set(new_ids)) == 10 and min(new_ids) >= max(lineage.column("_row_id").to_pylist()) + 1
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }  # nothing but metadata files unreferenced by manifest lists: merged-away manifests deleted


def set_properties_with_pyiceberg(tmp_path: Path, props: dict[str, str]) -> None:
    cat = PyIcebergSqlCatalog(
        CATALOG_NAME, uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=str(tmp_path / "wh")
    )
    try:
        with cat.load_table("db.t").transaction() as tx:
            tx.set_properties(props)
    finally:
        cat.engine.dispose()


def _ids_by_file(tbl: Table) -> dict[str, list[int]]:
    got = tbl.scan(columns=["id", "_file"]).to_arrow().sort_by("id")
    out: dict[str, list[int]] = {}
    for f, i in zip(got.column("_file").to_pylist(), got.column("id").to_pylist(), strict=True):
        out.setdefault(f, []).append(i)
    return out


def test_after_a_merge_commits_fast_append_again(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, **{"commit.manifest.min-count-to-merge": "3"})
    counts, batches = [], []
    for i in range(7):
        batches.append(rows(i * 10, 10, seed=i))
        tbl.append(batches[-1])
        counts.append(len(listed(tbl)))
    # the new manifest's bin merges when it holds 3: append 3 merges 3 -> 1, append 4 adds one, append 5
    # merges [new, 4th, merged] -> 1, ...
    assert counts == [1, 2, 1, 2, 1, 2, 1]
    assert [(m.added_files_count, m.existing_files_count) for m in listed(tbl)] == [(1, 6)]
    assert_all_readers(tbl, pa.concat_tables(batches))


def test_disabled_never_merges(tmp_path: Path) -> None:
    tbl = make(
        tmp_path, 2, **{"commit.manifest.min-count-to-merge": "2", "commit.manifest-merge.enabled": "false"}
    )
    appends(tbl, 4)
    assert len(listed(tbl)) == 4


def test_full_bins_of_older_manifests_merge_whatever_the_count(tmp_path: Path) -> None:
    """With a target of about two manifests, bins of old manifests merge even below the minimum count;
    the bin of the new manifest waits for it."""
    tbl = make(tmp_path, 2, **{"commit.manifest-merge.enabled": "false"})
    data = appends(tbl, 4)
    lengths = [m.manifest_length or 0 for m in listed(tbl)]
    target = 2 * max(lengths)
    assert 3 * min(lengths) > target  # same shape: ten rows each, lengths a few bytes apart
    props = {"commit.manifest-merge.enabled": "true", "commit.manifest.target-size-bytes": str(target)}
    set_properties_with_pyiceberg(tmp_path, props)
    tbl.refresh()
    fifth = rows(40, 10, seed=4)
    tbl.append(fifth)
    manifests = listed(tbl)
    # five manifests packed from the oldest end: [new] [m3 m2] [m1 m0] -> new kept, two merged pairs
    assert [(m.added_files_count, m.existing_files_count) for m in manifests] == [(1, 0), (0, 2), (0, 2)]
    assert_all_readers(tbl, pa.concat_tables([data, fifth]))


@pytest.mark.parametrize("version", [2, 3])
def test_deletes_merge_apart_from_data_and_keep_this_snapshots_removals(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version, **{"commit.manifest.min-count-to-merge": "3"})
    data = appends(tbl, 2)
    tbl.delete("id = 3")  # a delete manifest (data manifests: 2, below the count)
    tbl.delete("id = 13")
    data = data.filter(pc.invert(pc.is_in(data.column("id"), pa.array([3, 13], pa.int64()))))
    assert_all_readers(tbl, data, pyiceberg=True)
    result = tbl.delete("id >= 10 and id < 20")  # removes the second data file whole: a DELETED entry
    assert result.commit is not None and result.removed_data_files
    data = data.filter(
        pc.invert(pc.and_(pc.greater_equal(data.column("id"), 10), pc.less(data.column("id"), 20)))
    )
    manifests = listed(tbl)
    contents = sorted(m.content for m in manifests)
    assert contents.count(0) >= 1 and contents.count(1) >= 1  # data and delete manifests never mix
    for m in manifests:
        for e in avro_entries(m.manifest_path):
            if e["status"] == DELETED:  # only this snapshot's removals survive a rewrite or merge
                assert e["snapshot_id"] == result.commit.snapshot_id
            kinds = {e["data_file"].get("content", 0) for e in avro_entries(m.manifest_path)}
            assert kinds <= ({0} if m.content == 0 else {1, 2})
    assert_all_readers(tbl, data)
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }


def test_a_failing_merge_write_commits_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, **{"commit.manifest.min-count-to-merge": "3"})
    data = appends(tbl, 2)
    before_files, before_snapshot = table_files(tbl), tbl.metadata.current_snapshot()
    calls = []

    def fail_on_merge(stage: str) -> None:
        calls.append(stage)
        if stage == "manifest" and calls.count("manifest") == 2:  # the new files' manifest, then the merge
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        tbl.append(rows(20, 10, seed=9), faults=fail_on_merge)
    tbl.refresh()
    assert tbl.metadata.current_snapshot() == before_snapshot
    assert table_files(tbl) == before_files
    assert_all_readers(tbl, data)


def test_concurrent_appends_with_merging_lose_nothing(tmp_path: Path) -> None:
    """Two handles on one table appending in turns: every retry re-merges on the refreshed base."""
    tbl = make(tmp_path, 2, **{"commit.manifest.min-count-to-merge": "3"})
    other = sql_catalog(tmp_path).load_table("db.t")
    data = []
    _, hook = raise_at("never", RuntimeError())
    for i in range(8):
        handle = tbl if i % 2 == 0 else other
        batch = rows(i * 10, 10, seed=i)
        handle.append(batch, faults=hook)  # the other handle is stale: its first attempt loses the race
        data.append(batch)
    tbl.refresh()
    assert len(tbl.metadata.snapshots) == 8
    assert_all_readers(tbl, pa.concat_tables(data))
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }


@pytest.mark.parametrize("version", [2, 3])
def test_merging_the_commits_own_manifests_uses_the_entries_it_wrote(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that marks files DELETED and then merges does not read back the manifests it just wrote:
    it merges the entries it wrote, which equal what reading them back gives (checked here on every
    merge of deletes, whole-file removals and a compaction, of data and delete manifests)."""
    original = manifest_merge._merged_entries
    reused: list[str] = []

    def both(io: Any, md: Any, m: ManifestFile, spec_id: int, snapshot_id: int, known: Any) -> Any:
        read_back = original(io, md, m, spec_id, snapshot_id, {})
        got = original(io, md, m, spec_id, snapshot_id, known)
        assert got == read_back, m.manifest_path
        if m.manifest_path in known:
            reused.append(m.manifest_path)
        return got

    monkeypatch.setattr(manifest_merge, "_merged_entries", both)
    tbl = make(tmp_path, version, **{"commit.manifest.min-count-to-merge": "2"})
    data = appends(tbl, 4)
    tbl.delete("id = 3 or id = 25")  # merge-on-read: position deletes (v2) or DVs (v3)
    tbl.delete("id >= 10 and id < 20")  # a whole data file removed: its manifest rewritten, then merged
    tbl.delete("id = 33")
    result = tbl.compact(options={"rewrite-all": "true"})
    assert result.added_data_files and reused
    gone = pc.is_in(data.column("id"), pa.array([3, 25, 33, *range(10, 20)], pa.int64()))
    assert_all_readers(tbl, data.filter(pc.invert(gone)))
