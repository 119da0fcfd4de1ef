"""Commits that land while a compaction runs (through a second table handle, after planning and before the
compaction commits): position deletes and DVs on files being rewritten fail their group's validation,
equality deletes and appends survive, two compactions of the same files do not both commit. In every case
no row is lost or resurrected and the files of failed groups are deleted."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit import SnapshotUpdate
from gpu_engine.errors import ValidationError
from gpu_engine.io.equality_delete_write import write_equality_deletes
from gpu_engine.table import Table
from gpu_engine.tasks import FileGroup

from ._compact_support import (
    Meanwhile,
    assert_no_stray_data_files,
    assert_nothing_referenced_is_missing,
    assert_rows_equal,
    data_files,
    gen_rows,
    new_table,
    read_file,
    replace_snapshots,
    snapshot_entries,
)

PARTIAL = {"partial-progress.enabled": "true", "partial-progress.max-commits": "3"}


def setup(tmp_path: Path, version: int) -> tuple[SqlCatalog, Table, pa.Table]:
    """Three partitions (one compaction group each) of four small files."""
    cat, tbl = new_table(tmp_path, version, partitioned=True)
    parts = [gen_rows(i * 30, 30, seed=i) for i in range(4)]
    for p in parts:
        tbl.append(p)
    return cat, tbl, pa.concat_tables(parts)


def options(partial: bool, **extra: str) -> dict[str, str]:
    return {"rewrite-all": "true", **(PARTIAL if partial else {}), **extra}


def other(cat: SqlCatalog) -> Table:
    return cat.load_table("db.t")


def live_id_in(expected: pa.Table, group: FileGroup) -> int:
    """An id of a live row stored in the group's first file."""
    ids = set(read_file(group.files[0].path)["id"].to_pylist()) & set(expected["id"].to_pylist())
    return int(min(ids))


def without_ids(data: pa.Table, ids: list[int]) -> pa.Table:
    return data.filter(pc.invert(pc.is_in(data["id"], pa.array(ids, pa.int64()))))


def assert_table(cat: SqlCatalog, expected: pa.Table) -> Table:
    fresh = other(cat)
    assert_rows_equal(fresh.scan(backend="cpu").to_arrow(), expected)
    assert_nothing_referenced_is_missing(fresh)
    assert_no_stray_data_files(fresh)  # the files of failed groups are gone
    return fresh


# -- (a) position deletes / DVs on files being rewritten -------------------------------------------------


@pytest.mark.parametrize("target", [0, 2], ids=["rewritten-group", "later-group"])
@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
@pytest.mark.parametrize("version", [2, 3])
def test_concurrent_row_delete_fails_its_group(
    tmp_path: Path, version: int, partial: bool, target: int
) -> None:
    """When group 0 has been rewritten, a delete lands on a file of group ``target`` (0: already rewritten
    from the old state; 2: planned before the delete, rewritten after it)."""
    cat, tbl, expected = setup(tmp_path, version)
    plan = tbl.compact(options=options(partial), dry_run=True).plan
    assert len(plan.groups) == 3
    victim = live_id_in(expected, plan.groups[target])
    hook = Meanwhile(lambda g: other(cat).delete(f"id = {victim}", backend="cpu"), at=0)
    expected = without_ids(expected, [victim])
    if partial:
        result = tbl.compact(options=options(partial), progress=hook, backend="cpu")
        assert [(f.group_index, f.stage) for f in result.failures] == [(target, "validation")]
        assert "added deletes" in result.failures[0].error
        assert sorted(g.group_index for g in result.groups) == sorted({0, 1, 2} - {target})
        assert len(result.commits) == 2
        fresh = assert_table(cat, expected)
        assert replace_snapshots(fresh) == 2
        kept = set(data_files(fresh)) & {f.path for f in plan.groups[target].files}
        assert kept == {f.path for f in plan.groups[target].files}  # the failed group's files stay
    else:
        with pytest.raises(ValidationError, match="added deletes"):
            tbl.compact(options=options(partial), progress=hook, backend="cpu")
        fresh = assert_table(cat, expected)
        assert replace_snapshots(fresh) == 0
    assert hook.done and hook.finished[0] == (0, None)
    # the concurrent delete's row stays deleted (the DV or position delete still applies)
    deletes = [e.file for e in snapshot_entries(fresh) if e.file.content == 1]
    assert deletes
    if version >= 3:
        assert all(d.file_format == "PUFFIN" for d in deletes)
    # and a new compaction of the current state goes through
    again = fresh.compact(options=options(False), backend="cpu")
    assert not again.failures
    assert_table(cat, expected)


@pytest.mark.parametrize("how", ["two-files", "whole-file"])
@pytest.mark.parametrize("version", [2, 3])
def test_concurrent_delete_of_several_rows_or_a_whole_file(tmp_path: Path, version: int, how: str) -> None:
    """A delete over two files of group 1 (on v2 one position delete file for both, matched by its
    ``file_path`` bounds), or of every row of one of its files (the file is removed)."""
    cat, tbl, expected = setup(tmp_path, version)
    plan = tbl.compact(options=options(True), dry_run=True).plan
    group = plan.groups[1]
    live = set(expected["id"].to_pylist())
    first, second = (read_file(f.path)["id"].to_pylist() for f in group.files[:2])
    victims = [min(set(first) & live), min(set(second) & live)] if how == "two-files" else first
    hook = Meanwhile(
        lambda g: other(cat).delete(f"id in ({', '.join(map(str, victims))})", backend="cpu"), at=0
    )
    result = tbl.compact(options=options(True), progress=hook, backend="cpu")
    assert hook.done
    assert [(f.group_index, f.stage) for f in result.failures] == [(1, "validation")]
    assert ("was removed" if how == "whole-file" else "added deletes") in result.failures[0].error
    if how == "two-files" and version == 2:
        added = [e.file for e in snapshot_entries(other(cat)) if e.file.content == 1]
        assert any(d.referenced_data_file is None for d in added)  # the spanning file was exercised
    assert_table(cat, without_ids(expected, victims))


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
@pytest.mark.parametrize("version", [2, 3])
def test_delete_landing_while_the_compaction_commits(tmp_path: Path, version: int, partial: bool) -> None:
    """The delete lands after the pre-commit check, between the manifests and the swap: the swap loses
    the race, and the retry's validation sees the delete."""
    cat, tbl, expected = setup(tmp_path, version)
    plan = tbl.compact(options=options(partial), dry_run=True).plan
    victim = live_id_in(expected, plan.groups[0])
    landed: list[object] = []

    def faults(stage: str) -> None:
        if stage == "manifest-list" and not landed:
            landed.append(other(cat).delete(f"id = {victim}", backend="cpu"))

    expected = without_ids(expected, [victim])
    if partial:
        result = tbl.compact(options=options(partial), faults=faults, backend="cpu")
        assert [(f.group_index, f.stage) for f in result.failures] == [(0, "commit")]
        assert len(result.commits) == 2
    else:
        with pytest.raises(ValidationError, match="added deletes"):
            tbl.compact(options=options(partial), faults=faults, backend="cpu")
    assert landed
    assert_table(cat, expected)


def test_delete_outside_the_compacted_partition_does_not_conflict(tmp_path: Path) -> None:
    cat, tbl, expected = setup(tmp_path, 3)
    us = expected.filter(pc.field("region") == "us")["id"].to_pylist()
    hook = Meanwhile(lambda g: other(cat).delete(f"id in ({us[0]}, {us[1]})", backend="cpu"))
    result = tbl.compact(options=options(False), where="region = 'eu'", progress=hook, backend="cpu")
    assert hook.done and not result.failures and len(result.commits) == 1
    assert_table(cat, without_ids(expected, us[:2]))


# -- (b) equality deletes, (c) appends -------------------------------------------------------------------


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
@pytest.mark.parametrize("version", [2, 3])
def test_concurrent_equality_delete_still_applies(tmp_path: Path, version: int, partial: bool) -> None:
    cat, tbl, expected = setup(tmp_path, version)
    plan = tbl.compact(options=options(partial), dry_run=True).plan
    victims = [live_id_in(expected, g) for g in plan.groups]  # a row in every group
    hit = expected.filter(pc.is_in(expected["id"], pa.array(victims, pa.int64())))
    keys = pa.table({"id": hit["id"].combine_chunks(), "region": hit["region"].combine_chunks()})
    hook = Meanwhile(lambda g: other(cat).delete_rows(keys, on=["id", "region"], backend="cpu"), at=0)
    result = tbl.compact(options=options(partial), progress=hook, backend="cpu")
    assert hook.done and not result.failures
    assert result.rewritten_data_files == plan.files
    fresh = assert_table(cat, without_ids(expected, victims))
    # the new files keep the starting sequence number, below the equality delete's
    eq = [e for e in snapshot_entries(fresh) if e.file.content == 2]
    new = [e for e in snapshot_entries(fresh) if e.file.content == 0]
    assert eq and new
    assert all((n.sequence_number or 0) < (e.sequence_number or 0) for n in new for e in eq)
    # equality-deleted rows stay deleted after another compaction too (now rewritten away)
    fresh.compact(options=options(False), backend="cpu")
    assert_table(cat, without_ids(expected, victims))


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_a_starting_sequence_number_of_zero_is_kept(tmp_path: Path, partial: bool) -> None:
    """A table upgraded from v1 compacts from a snapshot of sequence number 0: the new files keep 0 (Java
    writes it explicitly), so an equality delete committed meanwhile (sequence number 1) still applies to
    them; they had taken a fresh number and the deleted rows came back."""
    cat, tbl = new_table(tmp_path, 1, partitioned=True)
    parts = [gen_rows(i * 30, 30, seed=i) for i in range(4)]
    for p in parts:
        tbl.append(p)
    expected = pa.concat_tables(parts)
    with tbl.update_properties() as props:
        props.set("format-version", "2")
    current = tbl.refresh().metadata.current_snapshot()
    assert current is not None and current.sequence_number == 0
    plan = tbl.compact(options=options(partial), dry_run=True).plan
    victims = [live_id_in(expected, g) for g in plan.groups]
    hit = expected.filter(pc.is_in(expected["id"], pa.array(victims, pa.int64())))
    keys = pa.table({"id": hit["id"].combine_chunks(), "region": hit["region"].combine_chunks()})
    hook = Meanwhile(lambda g: other(cat).delete_rows(keys, on=["id", "region"], backend="cpu"), at=0)
    result = tbl.compact(options=options(partial), progress=hook, backend="cpu")
    assert hook.done and not result.failures
    fresh = assert_table(cat, without_ids(expected, victims))
    new = [e for e in snapshot_entries(fresh) if e.file.content == 0]
    assert new and all(e.sequence_number == 0 for e in new)


def test_equality_delete_conflicts_without_the_starting_sequence_number(tmp_path: Path) -> None:
    cat, tbl, expected = setup(tmp_path, 2)
    key = expected.slice(0, 1).select(["id", "region"])
    hook = Meanwhile(lambda g: other(cat).delete_rows(key, on=["id", "region"], backend="cpu"))
    opts = options(False, **{"use-starting-sequence-number": "false"})
    with pytest.raises(ValidationError, match="added deletes"):
        tbl.compact(options=opts, progress=hook, backend="cpu")
    fresh = assert_table(cat, without_ids(expected, key["id"].to_pylist()))
    assert replace_snapshots(fresh) == 0


def spec_scoped_equality_delete(tbl: Table, keys: pa.Table) -> None:
    """Commit ``keys`` as equality deletes of the default spec only, as a streaming writer (Flink) does."""
    md = tbl.metadata
    ids = [md.schema.find_field(c).field_id for c in keys.column_names]
    files = write_equality_deletes(tbl.io, md.location, md.schema, md.spec, md.default_spec_id, keys, ids)
    tbl.commit(SnapshotUpdate("delete", added=files))


@pytest.mark.parametrize("version", [2, 3])
def test_partition_scoped_equality_delete_fails_a_rewrite_across_specs(tmp_path: Path, version: int) -> None:
    """Files of spec 0 (by region) compacted into spec 1 (by bucket(4, id)) while an equality delete of spec
    1 only lands: it did not apply to the spec 0 rows, but would to their rewrite (which keeps the starting
    sequence number, below the delete's). The rewrite fails validation; the rows stay."""
    cat, tbl, expected = setup(tmp_path, version)
    with tbl.update_spec() as u:
        u.remove_field("region")
        u.add_field("bucket(4, id)")
    key = expected.slice(0, 1).select(["id"])  # its row lives in a spec 0 file: the delete misses it
    hook = Meanwhile(lambda g: spec_scoped_equality_delete(other(cat), key), at=0)
    with pytest.raises(ValidationError, match="scoped to partitions of spec 1"):
        tbl.compact(options=options(False), progress=hook, backend="cpu")
    fresh = assert_table(cat, expected)  # the row was never deleted, and is not now
    assert replace_snapshots(fresh) == 0
    fresh.compact(options=options(False), backend="cpu")  # planned after the delete: its rows stay too
    assert_table(cat, expected)


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
@pytest.mark.parametrize("version", [2, 3])
def test_concurrent_append_survives(tmp_path: Path, version: int, partial: bool) -> None:
    cat, tbl, expected = setup(tmp_path, version)
    extra = gen_rows(5000, 30, seed=77)
    hook = Meanwhile(lambda g: other(cat).append(extra), at=1)
    result = tbl.compact(options=options(partial), progress=hook, backend="cpu")
    assert hook.done and not result.failures
    fresh = assert_table(cat, pa.concat_tables([expected, extra]))
    appended = fresh.scan(filter="id >= 5000", backend="cpu").plan().tasks
    assert len(appended) == 3  # the appended files, untouched
    if version >= 3:  # the appended rows got fresh row ids, the others kept theirs
        got = fresh.scan(columns=["id", "_row_id"], backend="cpu").to_arrow()
        assert len(set(got["_row_id"].to_pylist())) == got.num_rows


# -- (d) two compactions of the same files ----------------------------------------------------------------


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
@pytest.mark.parametrize("version", [2, 3])
def test_overlapping_compactions_commit_once(tmp_path: Path, version: int, partial: bool) -> None:
    cat, tbl, expected = setup(tmp_path, version)
    lineage = tbl.scan(columns=["id", "_row_id"], backend="cpu").to_arrow() if version >= 3 else None
    second: list[Table] = []

    def compact_meanwhile(group: FileGroup) -> object:
        second.append(other(cat))
        return second[0].compact("sort", sort_order="id", options=options(False), backend="cpu")

    hook = Meanwhile(compact_meanwhile, at=0)
    if partial:
        result = tbl.compact(options=options(partial), progress=hook, backend="cpu")
        assert sorted((f.group_index, f.stage) for f in result.failures) == [
            (i, "validation") for i in range(3)
        ]
        assert "was removed" in result.failures[0].error
        assert not result.commits and not result.groups
    else:
        with pytest.raises(ValidationError, match="was removed"):
            tbl.compact(options=options(partial), progress=hook, backend="cpu")
    fresh = assert_table(cat, expected)
    assert replace_snapshots(fresh) == 1  # the second compaction's
    assert fresh.metadata_location == second[0].metadata_location  # the winner's files are the table's
    assert len(data_files(fresh)) == 3
    if lineage is not None:
        assert_rows_equal(fresh.scan(columns=["id", "_row_id"], backend="cpu").to_arrow(), lineage)


def test_overlap_in_one_partition_fails_only_that_group(tmp_path: Path) -> None:
    cat, tbl, expected = setup(tmp_path, 3)
    plan = tbl.compact(options=options(True), dry_run=True).plan
    eu = next(g.index for g in plan.groups if g.partition == ("eu",))
    hook = Meanwhile(
        lambda g: other(cat).compact(options=options(False), where="region = 'eu'", backend="cpu"), at=0
    )
    result = tbl.compact(options=options(True), progress=hook, backend="cpu")
    assert [(f.group_index, f.stage) for f in result.failures] == [(eu, "validation")]
    assert sorted(g.group_index for g in result.groups) == sorted({0, 1, 2} - {eu})
    fresh = assert_table(cat, expected)
    assert replace_snapshots(fresh) == 3


# -- (e) the branch moved back under the compaction ----------------------------------------------------------


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
@pytest.mark.parametrize("version", [2, 3])
def test_a_rollback_under_the_compaction_loses_no_row(tmp_path: Path, version: int, partial: bool) -> None:
    """The compaction read the rows with a delete applied; main is rolled back to before that delete while it
    runs: committing the rewritten files would delete those rows again, so no group may commit them."""
    cat, tbl, expected = setup(tmp_path, version)
    before_delete = tbl.metadata.current_snapshot_id
    assert before_delete is not None
    tbl.delete("id in (3, 40, 41, 75, 100)")  # rows in several groups
    rollback = Meanwhile(lambda g: other(cat).manage_snapshots().rollback_to(before_delete).commit(), at=1)
    if partial:  # groups committed before the rollback are rolled back with it; every later one fails
        result = tbl.compact(options=options(partial), progress=rollback, backend="cpu")
        assert result.failures and {f.stage for f in result.failures} == {"validation"}
    else:
        with pytest.raises(ValidationError, match="'main' no longer descends from snapshot"):
            tbl.compact(options=options(partial), progress=rollback, backend="cpu")
    assert rollback.done
    fresh = assert_table(cat, expected)  # every row of the rolled-back-to snapshot, none deleted again
    assert fresh.metadata.current_snapshot_id == before_delete


def test_a_concurrent_delete_naming_the_file_in_another_spelling_fails_the_compaction(tmp_path: Path) -> None:
    """Reads match a position delete's path across spellings (file:///x and /x), so validation must too:
    else the rewrite lands without the concurrent delete and its row comes back."""
    import pyarrow.parquet as pq

    from gpu_engine.iceberg.content_file import POSITION_DELETES, ContentFile
    from gpu_engine.io.position_deletes import PATH_FIELD_ID

    from ._support import sql_catalog

    tbl = sql_catalog(tmp_path).create_table(
        "db.r", pa.schema([("id", pa.int64())]), properties={"format-version": "2"}
    )
    tbl.append(pa.table({"id": pa.array(range(10), pa.int64())}))
    recorded = tbl.scan(columns=["_file"]).to_arrow().column(0)[0].as_py()
    other_spelling = (
        recorded.removeprefix("file://") if recorded.startswith("file://") else "file://" + recorded
    )
    path = tmp_path / "concurrent-deletes.parquet"
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(PATH_FIELD_ID).encode()}),
            pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
        ]
    )
    pq.write_table(pa.table({"file_path": [other_spelling], "pos": [4]}, schema=schema), path)
    deletes = ContentFile(
        str(path), "PARQUET", 0, (), 1, path.stat().st_size, content=POSITION_DELETES,
        referenced_data_file=other_spelling,
    )  # fmt: skip
    other = tbl.catalog.load_table("db.r") if tbl.catalog is not None else tbl
    landed: list[int] = []

    def concurrent_writer(stage: str) -> None:
        if stage == "manifest" and not landed:
            landed.append(other.commit(SnapshotUpdate("delete", added=[deletes])).snapshot_id)

    with pytest.raises(ValidationError, match="delete"):
        tbl.compact(options={"rewrite-all": "true"}, faults=concurrent_writer)
    assert landed
    assert 4 not in tbl.refresh().scan().to_arrow().column("id").to_pylist()


def _upgrade_and_append(cat: SqlCatalog, upgrade: bool = True) -> dict[int, tuple[int, int]]:
    """Another writer upgrades the table to v3 (unless done before) and appends: that first v3 snapshot
    gives every row an id. The lineage of every row afterwards."""
    writer = other(cat)
    if upgrade:
        writer.update_properties().set("format-version", "3").commit()
    writer.append(gen_rows(9000, 3, seed=9))
    got = writer.scan(columns=["id", "_row_id", "_last_updated_sequence_number"], backend="cpu").to_arrow()
    return {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in got.to_pylist()}


@pytest.mark.parametrize("upgraded", ["meanwhile", "before"])
@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_a_first_v3_commit_under_the_compaction_fails_it(
    tmp_path: Path, partial: bool, upgraded: str
) -> None:
    """Planned on v2, or on v3 before the table's first v3 snapshot: its rows read without lineage, its
    files written without it. Committed after another writer's first v3 snapshot (which gave every row an
    id), the rows would get new ids in place of those (the spec: a moved row keeps its _row_id). Refused;
    run afterwards it keeps them."""
    cat, tbl, expected = setup(tmp_path, 2)
    if upgraded == "before":
        tbl.update_properties().set("format-version", "3").commit()
    hook = Meanwhile(lambda g: _upgrade_and_append(cat, upgrade=upgraded == "meanwhile"), at=0)
    if partial:
        result = tbl.compact(options=options(partial), progress=hook, backend="cpu")
        assert not result.commits and {f.stage for f in result.failures} == {"validation"}
    else:
        with pytest.raises(ValidationError, match=r"gave every row an id .* the rows it rewrote would lose"):
            tbl.compact(options=options(partial), progress=hook, backend="cpu")
    lineage = hook.done[0]
    assert isinstance(lineage, dict)
    fresh = other(cat)
    assert replace_snapshots(fresh) == 0
    assert_table(cat, pa.concat_tables([expected, gen_rows(9000, 3, seed=9)]))
    fresh.compact(options=options(False), backend="cpu")
    got = fresh.scan(columns=["id", "_row_id", "_last_updated_sequence_number"], backend="cpu").to_arrow()
    assert {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in got.to_pylist()} == lineage


def _lineage(tbl: Table) -> list[tuple[int, int]]:
    got = tbl.scan(columns=["_row_id", "_last_updated_sequence_number"], backend="cpu").to_arrow()
    return [(r["_row_id"], r["_last_updated_sequence_number"]) for r in got.to_pylist()]


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_a_compaction_may_be_the_first_v3_commit(tmp_path: Path, partial: bool) -> None:
    """Upgraded to v3 before the compaction, with no v3 snapshot yet: its commit is the first v3 snapshot
    and gives every row an id, all groups in that one commit even with partial progress (a later commit
    of its own would give the rows it moves other ids than its first one gave them)."""
    cat, tbl, expected = setup(tmp_path, 2)
    tbl.update_properties().set("format-version", "3").commit()
    result = tbl.compact(options=options(partial), backend="cpu")
    assert not result.failures and len(result.commits) == 1 and result.rewritten_data_files == 12
    fresh = assert_table(cat, expected)
    ids = [row_id for row_id, _ in _lineage(fresh)]
    assert None not in ids and len(set(ids)) == len(ids) == expected.num_rows


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_nothing_to_compact_before_the_first_v3_snapshot(tmp_path: Path, partial: bool) -> None:
    """An empty v3 table, or one just upgraded whose single file needs no rewrite: no group, no commit (the
    one-commit rule for a first v3 snapshot divided by the number of groups)."""
    _, empty = new_table(tmp_path / "empty", 3)
    _, upgraded = new_table(tmp_path / "upgraded", 2)
    upgraded.append(gen_rows(0, 30, seed=1))
    upgraded.update_properties().set("format-version", "3").commit()
    for tbl in (empty, upgraded):
        before = tbl.metadata.current_snapshot_id
        result = tbl.compact(options=PARTIAL if partial else {}, backend="cpu")
        assert not result.failures and not result.commits and result.rewritten_data_files == 0
        assert tbl.refresh().metadata.current_snapshot_id == before


def _ids(tbl: Table) -> set[tuple[int, int]]:
    got = tbl.scan(columns=["id", "_row_id"], backend="cpu").to_arrow().to_pylist()
    return {(r["id"], r["_row_id"]) for r in got}


def test_partial_commits_after_an_upgrade_under_the_compaction_keep_the_ids_given(tmp_path: Path) -> None:
    """Planned on v2 and upgraded meanwhile: its first partial commit is the first v3 snapshot; the groups
    after it, read without ids, would change the ids that commit gave: they fail validation, and run
    again they keep them."""
    cat, tbl, expected = setup(tmp_path, 2)
    hook = Meanwhile(lambda g: other(cat).update_properties().set("format-version", "3").commit(), at=0)
    result = tbl.compact(options=options(True), progress=hook, backend="cpu")
    assert len(result.commits) == 1 and {f.stage for f in result.failures} == {"validation"}
    fresh = assert_table(cat, expected)
    before = _ids(fresh)
    fresh.compact(options=options(True), backend="cpu")
    assert _ids(fresh) == before and len(before) == expected.num_rows


def test_a_compaction_on_a_handle_an_expiry_left_behind_plans_on_the_current_table(tmp_path: Path) -> None:
    """Planned on the stale handle's snapshot, whose manifest list another job's expiry had deleted: a
    missing file was reported as if the table were corrupt."""
    cat, tbl = new_table(tmp_path, 2)
    for i in range(4):
        tbl.append(gen_rows(i * 10, 10, seed=i))
    stale = cat.load_table("db.t")
    tbl.append(gen_rows(100, 10, seed=9))
    tbl.expire_snapshots(
        older_than=max(s.timestamp_ms for s in tbl.metadata.snapshots) + 60_000, retain_last=1
    )
    result = stale.compact(options={"rewrite-all": "true"})
    assert result.rewritten_data_files == 5 and result.plan.snapshot_id == tbl.metadata.current_snapshot_id
    assert len(cat.load_table("db.t").scan().to_arrow()) == 50
