"""Snapshot expiration: retention by ``retain_last`` / ``older_than`` / ref policies, the metadata-only
commit (read back by our scan and PyIceberg), deletion of the files only expired snapshots reached, and
nothing deleted when the commit fails."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit import table_update
from gpu_engine.errors import (
    CommitConflict,
    InvalidOption,
    ManifestError,
    SnapshotNotFound,
    ValidationError,
)
from gpu_engine.iceberg import snapshots as sn
from gpu_engine.iceberg.snapshots import SnapshotRef
from gpu_engine.table import Table

from ._support import (
    assert_same_rows,
    ours,
    pyiceberg_static,
    referenced_files,
    rows,
    sql_catalog,
    table_files,
    with_raw_properties,
)

FAST_RETRIES = {
    "commit.retry.min-wait-ms": "1",
    "commit.retry.max-wait-ms": "2",
    "commit.retry.num-retries": "2",
}


def build(tmp_path: Path) -> tuple[SqlCatalog, Table]:
    """Four snapshots: append, append, delete (removes the first append's rows), append."""
    cat = sql_catalog(tmp_path)
    props = {"format-version": "2", **FAST_RETRIES}
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties=props)
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 10))
    tbl.delete("id < 5")
    tbl.append(rows(20, 5))
    assert len(tbl.metadata.snapshots) == 4
    return cat, tbl


def set_refs(cat: SqlCatalog, tbl: Table, refs: dict[str, SnapshotRef]) -> None:
    md = replace(tbl.metadata, snapshot_refs={**tbl.metadata.snapshot_refs, **refs})
    path = table_update.metadata_path(md, tbl.metadata_location, file_system_table=False)
    table_update.write_metadata(tbl.io, path, md)
    cat.commit_metadata(tbl.identifier, tbl.metadata_location, path)
    tbl.refresh()


def after_all(tbl: Table) -> int:
    return max(s.timestamp_ms for s in tbl.metadata.snapshots) + 1


def assert_kept_files_exist(tbl: Table) -> None:
    assert not {p for p in referenced_files(tbl) if not Path(p).exists()}


def test_retain_last_expires_old_snapshots_and_their_files(tmp_path: Path) -> None:
    cat, tbl = build(tmp_path)
    before = ours(tbl)
    files_before = referenced_files(tbl)
    old_ids = [s.snapshot_id for s in tbl.metadata.snapshots]
    result = tbl.expire_snapshots(older_than=after_all(tbl), retain_last=2)
    assert result.expired_snapshot_ids == tuple(old_ids[:2])
    assert [s.snapshot_id for s in tbl.metadata.snapshots] == old_ids[2:]
    assert {e.snapshot_id for e in tbl.metadata.snapshot_log} <= set(old_ids[2:])
    fresh = cat.load_table("db.t")
    assert fresh.metadata_location == result.metadata_location
    assert_same_rows(ours(fresh), before, context="ours after expire")
    assert_same_rows(pyiceberg_static(fresh), before, context="pyiceberg after expire")
    assert_kept_files_exist(fresh)
    kept = referenced_files(fresh)
    gone = files_before - kept
    assert gone  # the first snapshots' manifest lists at least
    assert not {p for p in gone if Path(p).exists()}
    deleted = {
        *result.deleted_manifest_lists, *result.deleted_manifests, *result.deleted_data_files,
        *result.deleted_delete_files,
    }  # fmt: skip
    assert deleted == gone
    assert len(result.deleted_manifest_lists) == 2
    assert not result.undeleted


def test_older_than_bounds_expiration_and_nothing_to_do(tmp_path: Path) -> None:
    _, tbl = build(tmp_path)
    first = min(s.timestamp_ms for s in tbl.metadata.snapshots)
    before = tbl.metadata_location
    noop = tbl.expire_snapshots(older_than=first, retain_last=1)
    assert noop.expired_snapshot_ids == () and noop.metadata_location is None
    assert tbl.metadata_location == before
    when = dt.datetime.fromtimestamp(after_all(tbl) / 1000, tz=dt.UTC)
    result = tbl.expire_snapshots(older_than=when + dt.timedelta(seconds=1))
    assert len(result.expired_snapshot_ids) == 3  # min-snapshots-to-keep defaults to 1
    assert [s.snapshot_id for s in tbl.metadata.snapshots] == [tbl.metadata.current_snapshot_id]
    assert_kept_files_exist(tbl)
    assert_same_rows(pyiceberg_static(tbl), ours(tbl), context="pyiceberg after expire")


def test_tags_keep_their_snapshot_and_old_refs_are_removed(tmp_path: Path) -> None:
    cat, tbl = build(tmp_path)
    snaps = tbl.metadata.snapshots
    set_refs(
        cat, tbl,
        {"keep": SnapshotRef(snaps[0].snapshot_id, "tag"),
         "stale": SnapshotRef(snaps[1].snapshot_id, "tag", max_ref_age_ms=1)},
    )  # fmt: skip
    result = tbl.expire_snapshots(older_than=after_all(tbl) + 5, retain_last=1)
    assert result.removed_refs == ("stale",)
    assert set(tbl.metadata.refs) == {"main", "keep"}
    assert set(result.expired_snapshot_ids) == {snaps[1].snapshot_id, snaps[2].snapshot_id}
    assert_kept_files_exist(cat.load_table("db.t"))
    assert_same_rows(tbl.scan(ref="keep").to_arrow(), rows(0, 10), context="tag scan")
    fresh = cat.load_table("db.t")
    assert_same_rows(pyiceberg_static(fresh), ours(fresh), context="pyiceberg after expire")


def test_the_log_before_an_expired_snapshot_goes_with_it(tmp_path: Path) -> None:
    """A tag keeps the first snapshot, the next two expire: the log keeps only what follows the last gap.

    Keeping the first entry would show it current until the fourth, so ``as_of`` a time when the second
    was current would read the first (Java's TableMetadata clears the log before a removed entry).
    """
    cat, tbl = build(tmp_path)
    snaps = tbl.metadata.snapshots
    set_refs(cat, tbl, {"keep": SnapshotRef(snaps[0].snapshot_id, "tag")})
    second = next(e.timestamp_ms for e in tbl.metadata.snapshot_log if e.snapshot_id == snaps[1].snapshot_id)
    tbl.expire_snapshots(older_than=after_all(tbl) + 5, retain_last=1)
    assert {s.snapshot_id for s in tbl.metadata.snapshots} == {snaps[0].snapshot_id, snaps[3].snapshot_id}
    assert [e.snapshot_id for e in tbl.metadata.snapshot_log] == [snaps[3].snapshot_id]
    with pytest.raises(SnapshotNotFound, match="snapshot-log"):
        tbl.scan(as_of=second).plan()


def test_an_expiry_removing_only_refs_keeps_the_log(tmp_path: Path) -> None:
    """No snapshot expires, a stale tag goes: the snapshot-log stays as it is, also when it names a
    snapshot another writer removed (Java's updateSnapshotLog rewrites it only when snapshots go; it was
    cut before that entry, and as_of the first snapshot's time failed)."""
    from gpu_engine.iceberg.snapshots import SnapshotLogEntry

    cat, tbl = build(tmp_path)
    snaps = tbl.metadata.snapshots
    log = list(tbl.metadata.snapshot_log)
    log.insert(1, SnapshotLogEntry(log[1].timestamp_ms - 1, 12345))  # a snapshot no longer in the table
    md = replace(tbl.metadata, snapshot_log=tuple(log))
    path = table_update.metadata_path(md, tbl.metadata_location, file_system_table=False)
    table_update.write_metadata(tbl.io, path, md)
    cat.commit_metadata(tbl.identifier, tbl.metadata_location, path)
    tbl.refresh()
    set_refs(cat, tbl, {"stale": SnapshotRef(snaps[1].snapshot_id, "tag", max_ref_age_ms=1)})
    result = tbl.expire_snapshots(retain_last=10)
    assert result.expired_snapshot_ids == () and result.removed_refs == ("stale",)
    assert [e.snapshot_id for e in tbl.metadata.snapshot_log] == [e.snapshot_id for e in log]
    assert_same_rows(tbl.scan(as_of=log[0].timestamp_ms).to_arrow(), rows(0, 10), context="as_of first")


def test_failed_commit_deletes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat, tbl = build(tmp_path)
    files = table_files(tbl)
    location = tbl.metadata_location

    def conflict(self: SqlCatalog, *args: object) -> str:
        raise CommitConflict("always")

    monkeypatch.setattr(SqlCatalog, "commit_metadata", conflict)
    with pytest.raises(CommitConflict, match="3 attempt"):
        tbl.expire_snapshots(older_than=after_all(tbl), retain_last=1)
    monkeypatch.undo()
    assert table_files(tbl) == files
    assert cat.load_table("db.t").metadata_location == location


def test_files_a_kept_snapshot_removed_go_with_the_snapshots_before_it(tmp_path: Path) -> None:
    """A compaction's snapshot lists the files it replaced as DELETED entries; once every snapshot that had
    them live expires, they are deleted (Iceberg Java's rule), though the compaction's snapshot is kept."""
    cat, tbl = build(tmp_path)
    before = ours(tbl)
    replaced = {p for p in referenced_files(tbl) if "/data/" in p}
    tbl.compact(options={"rewrite-all": "true"})
    result = tbl.expire_snapshots(older_than=after_all(tbl), retain_last=1)
    assert len(tbl.metadata.snapshots) == 1
    assert set(result.deleted_data_files) | set(result.deleted_delete_files) == replaced
    assert not {p for p in replaced if Path(p).exists()}
    fresh = cat.load_table("db.t")
    assert_kept_files_exist(fresh)
    assert_same_rows(ours(fresh), before, context="ours after expire")
    assert_same_rows(pyiceberg_static(fresh), before, context="pyiceberg after expire")


def test_named_snapshots_expire_whatever_their_age(tmp_path: Path) -> None:
    """``snapshot_ids`` (Java's expireSnapshotId): recent snapshots expire too; the files only they reached
    go; a ref head or an unknown id is refused, nothing committed."""
    _, tbl = build(tmp_path)
    ids = [s.snapshot_id for s in tbl.metadata.snapshots]
    before = ours(tbl)
    tbl.manage_snapshots().create_tag("keep", ids[0]).commit()
    location = tbl.metadata_location
    for bad, message in (
        (ids[-1], "head of 'main'"),
        (ids[0], "head of 'keep'"),
        (42, "no snapshot with id 42"),
    ):
        with pytest.raises(Exception, match=message):
            tbl.expire_snapshots(snapshot_ids=[bad])
    assert tbl.refresh().metadata_location == location
    result = tbl.expire_snapshots(snapshot_ids=[ids[1]])  # recent: the default age would keep it
    assert result.expired_snapshot_ids == (ids[1],)
    assert [s.snapshot_id for s in tbl.metadata.snapshots] == [ids[0], ids[2], ids[3]]
    assert len(result.deleted_manifest_lists) == 1 and not result.deleted_data_files  # data still live
    assert_kept_files_exist(tbl)
    assert_same_rows(ours(tbl), before, context="ours after expiring a named snapshot")
    assert_same_rows(pyiceberg_static(tbl), before, context="pyiceberg after expiring a named snapshot")
    assert_same_rows(ours_at(tbl, ids[0]), rows(0, 10), context="the tagged snapshot")


def ours_at(tbl: Table, snapshot_id: int) -> pa.Table:
    return tbl.scan(snapshot_id=snapshot_id).to_arrow()


def test_a_tags_ancestors_are_unreferenced_and_kept_while_young(tmp_path: Path) -> None:
    """As Java's RemoveSnapshots: a tag references its own snapshot only; its ancestors off every branch
    expire by the table's age, not by the tag's retention (a few seconds old: kept)."""
    tbl = sql_catalog(tmp_path).create_table("db.tag", pa.schema([("id", pa.int64())]))
    tbl.append(pa.table({"id": pa.array([1], pa.int64())}))
    first = tbl.metadata.current_snapshot_id
    tbl.append(pa.table({"id": pa.array([2], pa.int64())}))
    second = tbl.metadata.current_snapshot_id
    tbl.delete("id = 2")
    tbl.manage_snapshots().create_tag("release").commit()
    assert first is not None
    tbl.manage_snapshots().rollback_to(first).commit()  # second is now an ancestor of the tag only
    tbl.append(pa.table({"id": pa.array([4], pa.int64())}))
    result = tbl.expire_snapshots()
    assert second not in result.expired_snapshot_ids and not result.deleted_data_files
    assert sorted(tbl.scan(snapshot_id=second).to_arrow().column("id").to_pylist()) == [1, 2]


@pytest.mark.parametrize("value", ["false", "FALSE", "0", "no", " true"])
def test_gc_disabled_refuses_expiry(tmp_path: Path, value: str) -> None:
    """Anything but true disables it, as Java's Boolean.parseBoolean reads the property (values other than
    true and false are refused when set here; another engine may have written them)."""
    tbl = sql_catalog(tmp_path).create_table("db.gc", pa.schema([("id", pa.int64())]))
    tbl.append(pa.table({"id": pa.array([1], pa.int64())}))
    tbl.overwrite(pa.table({"id": pa.array([2], pa.int64())}))
    tbl = with_raw_properties(tbl, "db.gc", {"gc.enabled": value})
    with pytest.raises(ValidationError, match=rf"gc\.enabled={re.escape(repr(value))}"):
        tbl.expire_snapshots(older_than=dt.datetime.now() + dt.timedelta(days=1))
    assert len(tbl.refresh().metadata.snapshots) == 2


def test_ages_count_from_this_clock_not_from_a_fast_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer whose clock runs 10 days ahead leaves last-updated-ms in the future; expiry still ages
    snapshots and refs by the time now, as Java's does."""
    import time

    tbl = sql_catalog(tmp_path).create_table("db.skew", pa.schema([("id", pa.int64())]))
    tbl.append(pa.table({"id": pa.array([1], pa.int64())}))
    tbl.manage_snapshots().create_tag("week", max_ref_age_ms=7 * 86_400_000).commit()
    tbl.append(pa.table({"id": pa.array([2], pa.int64())}))
    real = time.time
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: real() + 10 * 86400)
        tbl.update_properties().set("owner", "fast clock").commit()
    result = tbl.expire_snapshots()
    assert not result.expired_snapshot_ids and not result.removed_refs


def test_a_handle_older_than_an_expiry_still_commits(tmp_path: Path) -> None:
    """A commit builds on the catalog's current metadata from its first attempt: the handle's snapshot and
    its manifests may have been expired and deleted by another writer meanwhile."""
    cat = sql_catalog(tmp_path)
    cat.create_table("db.s", pa.schema([("id", pa.int64())])).append(
        pa.table({"id": pa.array([1], pa.int64())})
    )
    stale = cat.load_table("db.s")
    other = cat.load_table("db.s")
    other.append(pa.table({"id": pa.array([2], pa.int64())}))
    result = other.expire_snapshots(older_than=dt.datetime.now() + dt.timedelta(seconds=1), retain_last=1)
    assert result.deleted_manifest_lists  # the stale handle's snapshot is gone, with its manifest list
    stale.append(pa.table({"id": pa.array([3], pa.int64())}))
    assert sorted(cat.load_table("db.s").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]


def test_the_kept_manifests_are_read_only_when_a_file_may_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expiring appends whose manifests later snapshots still list frees manifest lists only: the live
    manifests are not read (every expire of a long-lived table read the whole table's manifests)."""
    from gpu_engine.iceberg.manifests import read_manifest

    cat = sql_catalog(tmp_path)
    props = {"format-version": "2", "commit.manifest-merge.enabled": "false"}
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties=props)
    for i in range(6):
        tbl.append(rows(10 * i, 10))
    reads: list[str] = []

    def counting(m: object, **kwargs: object) -> object:
        reads.append(str(m))
        return read_manifest(m, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("gpu_engine.commit.expire.read_manifest", counting)
    result = tbl.expire_snapshots(snapshot_ids=[tbl.metadata.snapshots[2].snapshot_id])
    assert len(result.deleted_manifest_lists) == 1 and not result.deleted_manifests and reads == []
    tbl.compact(options={"rewrite-all": "true"})  # the appends' manifests replaced: their files may go
    result = tbl.expire_snapshots(older_than=after_all(tbl), retain_last=1)
    assert reads and len(result.deleted_data_files) == 6  # candidates, then the kept manifests read
    assert_kept_files_exist(tbl)
    assert len(tbl.scan().to_arrow()) == 60


def _empty_current_manifest_list(tbl: Table) -> None:
    """The current manifest list written again with its header and no records (an Avro file cut at a
    block boundary parses so)."""
    import io

    import fastavro

    snap = tbl.metadata.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    path = Path(snap.manifest_list.removeprefix("file://"))
    reader = fastavro.reader(io.BytesIO(path.read_bytes()))
    out = io.BytesIO()
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    fastavro.writer(out, reader.writer_schema, [], metadata=meta)
    path.write_bytes(out.getvalue())


def test_a_current_manifest_list_read_as_empty_refuses_the_expiry_and_deletes_nothing(tmp_path: Path) -> None:
    """Read as 'no live files', the first append's live data file was deleted (scans refused the table)."""
    cat, tbl = build(tmp_path)
    _empty_current_manifest_list(tbl)
    before = table_files(tbl)
    location = tbl.metadata_location
    with pytest.raises(ManifestError, match=r"lists 0 live data-files but snapshot .* total-data-files="):
        tbl.expire_snapshots(older_than=after_all(tbl), retain_last=1)
    assert table_files(tbl) == before and cat.load_table("db.t").metadata_location == location


@pytest.mark.parametrize("which", ["kept", "expired-only"])
def test_an_unreadable_manifest_is_found_before_the_expiry_commits(tmp_path: Path, which: str) -> None:
    """The manifests were read after the expiry had committed: a kept one that could not be read raised
    then (the snapshots were gone, the error said nothing of it). A kept one now refuses the expiry with
    nothing committed; one only expired snapshots list is skipped (its files are left for orphan removal)."""
    cat, tbl = build(tmp_path)
    tbl.overwrite(rows(100, 3))  # every earlier file removed: their manifests are the expired snapshots' only
    all_manifests = {m["path"] for m in tbl.inspect.all_manifests().to_pylist()}
    live = {m["path"] for m in tbl.inspect.manifests().to_pylist()}
    target = sorted(live if which == "kept" else all_manifests - live)[0]
    Path(target.removeprefix("file://")).write_bytes(b"garbage")
    snapshots = len(tbl.metadata.snapshots)
    if which == "kept":
        with pytest.raises(ManifestError, match=re.escape(target.removeprefix("file://"))):
            tbl.expire_snapshots(older_than=after_all(tbl), retain_last=1)
        assert len(cat.load_table("db.t").metadata.snapshots) == snapshots
    else:
        result = tbl.expire_snapshots(older_than=after_all(tbl), retain_last=1)
        assert len(cat.load_table("db.t").metadata.snapshots) == 1 and result.expired_snapshot_ids
        assert sorted(cat.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == [100, 101, 102]


@given(st.integers(-(10**13), 10**13))  # years 1653..2286
@example(1_091_936_543_692)  # 2004-08-08T03:42:23.692Z: 1_091_936_543_691 by float seconds
def test_datetimes_become_exact_milliseconds(ms: int) -> None:
    """Float seconds times 1000 lost a millisecond for some instants (2004, 2038): a snapshot at the cutoff
    minus one ms was kept."""
    from gpu_engine.commit.expire import to_ms

    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    assert to_ms(moment) == ms
    assert to_ms(moment.replace(tzinfo=None)) == ms  # naive: UTC
    assert to_ms(moment.astimezone(dt.timezone(dt.timedelta(hours=5, minutes=30)))) == ms


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"older_than": "7d"},
            r"older_than='7d': expected milliseconds since the epoch .*, not str",
        ),
        ({"older_than": 1.5e12}, r"older_than=1500000000000.0: .* not float"),
        ({"older_than": True}, r"older_than=True: .* not bool"),
        (
            {"older_than": dt.date(2020, 1, 1)},
            r"older_than=datetime.date\(2020, 1, 1\): .* \(give a datetime",
        ),
        ({"older_than": 2**63}, r"older_than=9223372036854775808: expected an integer in"),
        ({"retain_last": 0}, r"retain_last=0: expected an integer in 1\.\.2147483647"),
        ({"retain_last": 1.5}, r"retain_last=1.5: .* not float"),
        ({"retain_last": True}, r"retain_last=True: .* not a bool"),
        ({"retain_last": "2"}, r"retain_last='2': .* not str"),
        ({"snapshot_ids": 5}, r"snapshot_ids=5: expected a collection of snapshot ids"),
        ({"snapshot_ids": ["5"]}, r"snapshot_ids item='5': expected an integer"),
    ],
)
def test_bad_arguments_are_invalid_options_naming_them(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    """The argument and its value named in a gpu_engine error (they were bare TypeError and ValueError,
    or a float or bool retain_last taken as a number); nothing expires."""
    _, tbl = build(tmp_path)
    location = tbl.metadata_location
    with pytest.raises(InvalidOption, match=message):
        tbl.expire_snapshots(**kwargs)  # type: ignore[arg-type]
    assert tbl.refresh().metadata_location == location


def test_numpy_integers_are_taken_as_ints(tmp_path: Path) -> None:
    """An older_than or snapshot id read from an Arrow or numpy column expires as the plain int would."""
    import numpy as np

    _, tbl = build(tmp_path)
    first = tbl.metadata.snapshots[0].snapshot_id
    zero, first_id = np.int64(0), np.int64(first)
    result = tbl.expire_snapshots(older_than=zero, snapshot_ids=[first_id])  # type: ignore[arg-type,list-item]
    assert result.expired_snapshot_ids == (first,)


def set_statistics(cat: SqlCatalog, tbl: Table, entries: dict[int, tuple[str, str]]) -> None:
    """Give snapshots statistics files: {snapshot id: (table statistics path, partition statistics path)}."""
    stats = tuple(
        sn.StatisticsFile(sid, path, 10, 4, (sn.BlobMetadata("apache-datasketches-theta-v1", sid, 1, (1,)),))
        for sid, (path, _) in entries.items()
    )
    partition = tuple(sn.PartitionStatisticsFile(sid, path, 10) for sid, (_, path) in entries.items())
    md = replace(tbl.metadata, statistics=stats, partition_statistics=partition)
    path = table_update.metadata_path(md, tbl.metadata_location, file_system_table=False)
    table_update.write_metadata(tbl.io, path, md)
    cat.commit_metadata(tbl.identifier, tbl.metadata_location, path)
    tbl.refresh()


def test_statistics_files_go_with_their_snapshots_unless_a_kept_one_names_them_in_any_spelling(
    tmp_path: Path,
) -> None:
    """An expired snapshot's statistics files are deleted, except one a kept snapshot's entry still names,
    also where the entries spell it differently (``/x`` and ``file:///x``: engines write their own)."""
    cat, tbl = build(tmp_path)
    s0, s1, s2, s3 = (s.snapshot_id for s in tbl.metadata.snapshots)
    folder = tmp_path / "stats"
    folder.mkdir()
    made = {name: folder / name for name in ("a.stats", "a.parquet", "shared.stats", "b.parquet", "c.stats")}
    for p in made.values():
        p.write_bytes(b"0123456789")
    shared = made["shared.stats"]
    set_statistics(
        cat,
        tbl,
        {
            s0: (str(made["a.stats"]), str(made["a.parquet"])),
            s1: (str(shared), str(made["b.parquet"])),
            s3: (f"file://{shared}", str(made["c.stats"])),  # the same file as s1's, as a URI
        },
    )
    result = tbl.expire_snapshots(snapshot_ids=[s0, s1])
    assert {f.snapshot_id for f in tbl.metadata.statistics} == {s3}
    assert {f.snapshot_id for f in tbl.metadata.partition_statistics} == {s3}
    assert shared.exists() and made["c.stats"].exists()
    gone = {made["a.stats"], made["a.parquet"], made["b.parquet"]}
    assert not any(p.exists() for p in gone)
    assert sorted(result.deleted_statistics_files) == sorted(map(str, gone))
    assert s2 in {s.snapshot_id for s in tbl.metadata.snapshots}


def test_an_expiry_on_a_handle_another_expiry_left_behind_plans_again(tmp_path: Path) -> None:
    """Its first attempt read the kept snapshots' manifest lists from its own stale metadata: another
    expiry had deleted them, and a missing file was reported as if the table were corrupt."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **FAST_RETRIES})
    for i in range(4):
        tbl.append(rows(10 * i, 10))
    a, b = cat.load_table("db.t"), cat.load_table("db.t")
    a.append(rows(100, 5))
    later = after_all(a) + 60_000
    a.expire_snapshots(older_than=later, retain_last=1)
    result = b.expire_snapshots(older_than=later, retain_last=1)
    assert result.metadata_location is None or len(cat.load_table("db.t").metadata.snapshots) == 1
    assert len(cat.load_table("db.t").scan().to_arrow()) == 45
    assert_kept_files_exist(cat.load_table("db.t"))
