"""Fault injection at every stage of an append, a delete (position deletes, DVs new and replacing,
equality deletes) and an expire_snapshots: the table stays readable and equal to the old state (or the new
one when the swap landed), no file any snapshot references is deleted, and the files of a definitely failed
commit are removed (expire: nothing but its own metadata file)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gpu_engine as ge
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit import producer, retry
from gpu_engine.commit.append import append
from gpu_engine.commit.delete import DeleteResult
from gpu_engine.errors import CommitConflict, CommitStateUnknown
from gpu_engine.io import file_publish, parquet_write
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.fileio import _fsync_dir as fsync_dir
from gpu_engine.io.position_delete_write import write_position_deletes
from gpu_engine.table import Table

from ._support import (
    Interrupted,
    assert_all_readers,
    assert_same_rows,
    ours,
    raise_at,
    referenced_files,
    rows,
    sql_catalog,
    swap_lands_then,
    table_files,
    with_raw_properties,
)

FAST_RETRIES = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}


class Boom(RuntimeError):
    pass


def setup(tmp_path: Path, version: int = 2) -> tuple[SqlCatalog, Table, pa.Table]:
    cat = sql_catalog(tmp_path)
    props = {"format-version": str(version), **FAST_RETRIES}
    tbl = cat.create_table("db.t", rows(0, 0).schema, partition_spec=["region"], properties=props)
    first = rows(0, 20)
    tbl.append(first)
    return cat, tbl, first


def assert_intact(cat: SqlCatalog, tbl: Table, expected: pa.Table) -> Table:
    """The catalog's table reads ``expected`` everywhere and every referenced file exists."""
    fresh = cat.load_table("db.t")
    assert_all_readers(fresh, expected)
    missing = {p for p in referenced_files(fresh) if not Path(p).exists()}
    assert not missing
    return fresh


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("stage", ["data", "manifest", "manifest-list", "metadata", "swap"])
def test_definite_failure_leaves_old_state_and_no_files(tmp_path: Path, stage: str, version: int) -> None:
    cat, tbl, first = setup(tmp_path, version)
    before_location, before_files = tbl.metadata_location, table_files(tbl)
    seen, hook = raise_at(stage, Boom(stage))
    with pytest.raises(Boom):
        tbl.append(rows(20, 15), faults=hook)
    assert seen[-1] == stage
    assert tbl.metadata_location == before_location
    assert table_files(tbl) == before_files  # data files, manifests, lists, metadata: all removed
    assert_intact(cat, tbl, first)
    tbl.append(rows(20, 15))  # the table still takes writes
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


def test_failure_inside_the_data_write_removes_written_files(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    small = {"write.target-file-size-bytes": "4000", "write.parquet.row-group-size-bytes": "2000"}
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties=small)
    first = rows(0, 20)
    tbl.append(first)
    before = table_files(tbl)
    published: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        yield from rows(100, 2000).to_batches(max_chunksize=100)
        published.append(sum(p.endswith(".parquet") for p in table_files(tbl) - before))
        raise Boom("source failed")

    with pytest.raises(Boom):
        tbl.append(batches())
    assert published[0] >= 2  # files were finished before the source failed ...
    assert table_files(tbl) == before  # ... and are gone
    assert_intact(cat, tbl, first)


def test_unknown_state_before_the_swap_keeps_every_file(tmp_path: Path) -> None:
    cat, tbl, first = setup(tmp_path)
    before = table_files(tbl)
    _, hook = raise_at("swap", CommitStateUnknown("connection lost"))
    with pytest.raises(CommitStateUnknown):
        tbl.append(rows(20, 15), faults=hook)
    kept = table_files(tbl) - before
    assert any(p.endswith(".parquet") for p in kept)  # nothing deleted: data, manifest, list, metadata
    assert sum(p.endswith(".metadata.json") for p in kept) == 1
    assert sum(Path(p).name.startswith("snap-") for p in kept) == 1
    assert_intact(cat, tbl, first)  # the swap never happened


@pytest.mark.parametrize("version", [2, 3])
def test_swap_lands_but_reports_failure(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, tbl, first = setup(tmp_path, version)
    swap_lands_then(monkeypatch, CommitStateUnknown("the commit went through but its answer was lost"))
    second = rows(20, 15)
    with pytest.raises(CommitStateUnknown):
        tbl.append(second)
    monkeypatch.undo()
    fresh = assert_intact(cat, tbl, pa.concat_tables([first, second]))  # the new state, whole
    assert len(fresh.metadata.snapshots) == 2
    fresh.append(rows(35, 5))
    assert_intact(cat, tbl, pa.concat_tables([first, second, rows(35, 5)]))


def test_swap_raising_an_unexpected_error_counts_as_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, tbl, first = setup(tmp_path)
    swap_lands_then(monkeypatch, OSError("socket closed"))
    with pytest.raises(CommitStateUnknown, match="socket closed"):
        tbl.append(rows(20, 15))
    monkeypatch.undo()
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


def test_failed_attempts_are_cleaned_after_success(tmp_path: Path) -> None:
    cat, tbl, first = setup(tmp_path)
    before = table_files(tbl)
    _, hook = raise_at("swap", CommitConflict("lost a race"), times=2)
    result = tbl.append(rows(20, 15), faults=hook)
    assert result.commit.attempts == 3 and result.commit.orphaned == ()
    new = table_files(tbl) - before
    # what remains: the data files, the one new manifest (reused by all attempts), the committed list
    # and metadata file; the two failed attempts' lists and metadata files are gone
    assert sum(p.endswith(".metadata.json") for p in new) == 1
    assert [Path(p).name.split("-")[2] for p in new if Path(p).name.startswith("snap-")] == ["3"]
    assert new <= referenced_files(tbl) | {tbl.metadata_location}
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


def test_cleanup_failure_does_not_fail_the_commit(tmp_path: Path) -> None:
    cat, tbl, first = setup(tmp_path)
    seen: list[str] = []

    def hook(stage: str) -> None:
        seen.append(stage)
        if stage == "swap" and seen.count("swap") == 1:
            raise CommitConflict("lost a race")
        if stage == "cleanup":
            raise Boom("cleanup crashed")

    result = tbl.append(rows(20, 15), faults=hook)
    assert "cleanup" in seen
    orphaned = result.commit.orphaned
    assert len(orphaned) == 2 and all(Path(p).exists() for p in orphaned)  # attempt 1's list + metadata
    assert not set(orphaned) & referenced_files(tbl)
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


def test_retries_exhausted_removes_everything(tmp_path: Path) -> None:
    cat, tbl, first = setup(tmp_path)
    before = table_files(tbl)
    seen, hook = raise_at("swap", CommitConflict("always lost"), times=100)
    with pytest.raises(CommitConflict, match="after 5 attempt"):
        tbl.append(rows(20, 15), faults=hook)
    assert seen.count("swap") == 5  # commit.retry.num-retries = 4
    assert table_files(tbl) == before
    assert_intact(cat, tbl, first)


class FakeClock:
    """``time.monotonic`` for the producer, moved only by its injected ``sleep``, which records the waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.mark.parametrize(
    ("wait_ms", "waits"),
    [(125, [0.125] * 8), (375, [0.375, 0.375, 0.25])],
    ids=["waits-fill-the-timeout", "last-wait-cut-to-the-deadline"],
)
def test_retries_stop_at_the_total_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wait_ms: int, waits: list[float]
) -> None:
    """commit.retry.total-timeout-ms=1000 with 100 retries allowed and every swap losing the race: the
    commit retries while the fake clock is before the deadline, the last wait cut to end at it, and gives up
    at the first attempt that fails at or after it (waits of 1/8 s: 8 waits, 9 attempts; of 3/8 s: two
    waits, the third cut to 1/4 s, 4 attempts). Nothing is committed and every file it wrote is gone.
    (Jitter off: each wait is the full commit.retry.min-wait-ms = max-wait-ms.)"""
    cat, tbl, first = setup(tmp_path)
    props = tbl.update_properties()
    props.set("commit.retry.num-retries", "100").set("commit.retry.total-timeout-ms", "1000")
    props.set("commit.retry.min-wait-ms", str(wait_ms)).set("commit.retry.max-wait-ms", str(wait_ms)).commit()
    before_location, before_files = tbl.metadata_location, table_files(tbl)
    clock = FakeClock()
    monkeypatch.setattr(producer, "time", clock)  # the producer's clock only
    monkeypatch.setattr(retry, "random", type("NoJitter", (), {"uniform": staticmethod(lambda a, b: a)}))
    seen, hook = raise_at("swap", CommitConflict("always lost"), times=1000)
    with pytest.raises(CommitConflict, match=f"after {len(waits) + 1} attempt"):
        append(tbl, rows(20, 15), faults=hook, sleep=clock.sleep)
    assert clock.waits == waits and clock.now == 1001.0
    assert seen.count("swap") == len(waits) + 1
    assert tbl.metadata_location == before_location
    assert table_files(tbl) == before_files
    assert_intact(cat, tbl, first)


def test_interruption_during_the_swap_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, tbl, first = setup(tmp_path)
    swap_lands_then(monkeypatch, Interrupted())
    with pytest.raises(Interrupted):
        tbl.append(rows(20, 15))
    monkeypatch.undo()
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


def test_interruption_while_cleaning_up_after_the_commit_landed_deletes_nothing(tmp_path: Path) -> None:
    """Attempt 1 lost a race, attempt 2 landed; an interruption while attempt 1's leftovers go must not
    make the commit delete the files of the snapshot that landed (Java: clean-up after success only
    logs)."""
    cat, tbl, first = setup(tmp_path)

    def hook(stage: str, seen: list[str] = []) -> None:  # noqa: B006 - the stages seen, by design
        seen.append(stage)
        if stage == "swap" and seen.count("swap") == 1:
            raise CommitConflict("lost a race")
        if stage == "cleanup":
            raise Interrupted

    with pytest.raises(Interrupted):
        tbl.append(rows(20, 15), faults=hook)
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


@pytest.mark.parametrize("write", ["append", "properties"])
def test_old_metadata_deletion_failing_after_the_commit_keeps_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, write: str
) -> None:
    """write.metadata.delete-after-commit: an old metadata file that cannot be deleted (any error, e.g.
    a scheme without a file system here) is logged; the commit that landed stays, its files kept."""
    cat, tbl, first = setup(tmp_path)
    props = tbl.update_properties()
    props.set("write.metadata.delete-after-commit.enabled", "true")
    props.set("write.metadata.previous-versions-max", "1").commit()
    real = LocalFileIO.delete

    def refuse_metadata(self: LocalFileIO, path: str, missing_ok: bool = False) -> None:
        if path.endswith(".metadata.json"):
            raise ge.errors.UnsupportedFeature(f"no file system for {path}")
        real(self, path, missing_ok=missing_ok)

    monkeypatch.setattr(LocalFileIO, "delete", refuse_metadata)
    if write == "append":
        tbl.append(rows(20, 15))
        expected = pa.concat_tables([first, rows(20, 15)])
    else:
        tbl.update_properties().set("k", "v").commit()
        expected = first
    monkeypatch.undo()
    assert "could not delete old metadata file" in caplog.text
    fresh = assert_intact(cat, tbl, expected)
    assert fresh.metadata_location == tbl.metadata_location
    if write == "properties":
        assert fresh.properties["k"] == "v"


def test_interruption_before_the_swap_cleans_up(tmp_path: Path) -> None:
    cat, tbl, first = setup(tmp_path)
    before = table_files(tbl)
    _, hook = raise_at("metadata", Interrupted())
    with pytest.raises(Interrupted):
        tbl.append(rows(20, 15), faults=hook)
    assert table_files(tbl) == before
    assert_intact(cat, tbl, first)


def test_bad_retry_property_fails_before_committing_and_removes_data(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    tbl = with_raw_properties(tbl, "db.t", {"commit.retry.num-retries": "many"})  # create refuses it now
    with pytest.raises(ge.errors.InvalidProperty, match=r"commit\.retry\.num-retries='many'"):
        tbl.append(rows(0, 5))
    assert not list(Path(tbl.location).rglob("*.parquet"))
    assert cat.load_table("db.t").metadata.current_snapshot_id is None


# -- deletes: position deletes (v2), DVs (v3, new and replacing), equality deletes -------------------------

DELETE_KINDS = ["pos-v2", "dv-v3", "dv-v3-replace", "eq-v2", "eq-v3"]
COMMIT_STAGES = ["manifest", "manifest-list", "metadata", "swap"]


@dataclass
class DeleteCase:
    """A partitioned table of 40 rows (``dv-v3-replace``: with DVs already on its data files) and a delete
    of the rows with ``id >= 30`` of the chosen kind."""

    kind: str
    cat: SqlCatalog
    tbl: Table
    before: pa.Table
    after: pa.Table

    def run(self, hook: object = None) -> object:
        if self.kind.startswith("eq"):
            keys = self.before.filter(pc.field("id") >= 30).select(["region", "id"])
            return self.tbl.delete_rows(keys, on=["region", "id"], faults=hook)  # type: ignore[arg-type]
        return self.tbl.delete("id >= 30", faults=hook)  # type: ignore[arg-type]

    def written_kind(self) -> str:
        return "parquet" if self.kind.startswith(("pos", "eq")) else "puffin"


def delete_case(tmp_path: Path, kind: str) -> DeleteCase:
    version = 3 if kind.endswith(("v3", "replace")) else 2
    cat = sql_catalog(tmp_path)
    props = {"format-version": str(version), **FAST_RETRIES}
    tbl = cat.create_table("db.t", rows(0, 0).schema, partition_spec=["region"], properties=props)
    before = rows(0, 40)
    tbl.append(before.slice(0, 25))
    tbl.append(before.slice(25))
    if kind == "dv-v3-replace":
        tbl.delete("id < 5 or id = 33")  # DVs on the files the faulted delete targets again
        before = before.filter(~((pc.field("id") < 5) | (pc.field("id") == 33)))
    after = before.filter(pc.field("id") < 30)
    assert after.num_rows < before.num_rows
    return DeleteCase(kind, cat, tbl, before, after)


def check_table(case: DeleteCase, expected: pa.Table, referenced_before: set[str]) -> Table:
    """The catalog's table reads ``expected`` (our scan) and no file any snapshot references, before or
    now, is missing."""
    fresh = case.cat.load_table("db.t")
    assert_same_rows(ours(fresh), expected, context=f"{case.kind}: gpu_engine scan")
    missing = {p for p in referenced_before | referenced_files(fresh) if not Path(p).exists()}
    assert not missing
    return fresh


@pytest.mark.parametrize("kind", DELETE_KINDS)
@pytest.mark.parametrize("stage", COMMIT_STAGES)
def test_delete_definite_failure_leaves_old_state_and_no_files(tmp_path: Path, kind: str, stage: str) -> None:
    case = delete_case(tmp_path, kind)
    tbl = case.tbl
    location, files, referenced = tbl.metadata_location, table_files(tbl), referenced_files(tbl)
    seen, hook = raise_at(stage, Boom(stage))
    with pytest.raises(Boom):
        case.run(hook)
    assert seen[-1] == stage
    assert tbl.metadata_location == location
    assert table_files(tbl) == files  # delete files, manifests, lists, metadata: all removed
    check_table(case, case.before, referenced)
    case.run()  # the table still takes the delete
    check_table(case, case.after, referenced)


@pytest.mark.parametrize("kind", DELETE_KINDS)
def test_delete_failure_while_writing_delete_files(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delete files are written before the commit: a failure among them (after some were published)
    removes the ones written."""
    case = delete_case(tmp_path, kind)
    tbl = case.tbl
    files, referenced = table_files(tbl), referenced_files(tbl)
    published: list[int] = []
    if kind.startswith("pos"):

        def second_fails(*args: Any, **kwargs: Any) -> Any:
            if published:
                raise Boom("second position delete file")
            published.append(1)
            return write_position_deletes(*args, **kwargs)

        monkeypatch.setattr("gpu_engine.commit.delete_plan.write_position_deletes", second_fails)
    elif kind.startswith("eq"):  # partitions are written side by side: the third to publish fails
        lock = threading.Lock()

        def third_fails(directory: str) -> None:
            with lock:
                published.append(1)
                fail = len(published) == 3
            if fail:
                raise Boom("third equality delete file")
            fsync_dir(directory)

        monkeypatch.setattr(parquet_write, "_workers", lambda: 2)
        monkeypatch.setattr(file_publish, "_fsync_dir", third_fails)  # as file_publish imported it
    else:  # one Puffin file holds every DV: it is written whole or not at all
        real_write = LocalFileIO.write_bytes

        def puffin_fails(self: LocalFileIO, path: str, data: bytes) -> None:
            if path.endswith(".puffin"):
                published.append(1)
                raise Boom("puffin write")
            real_write(self, path, data)

        monkeypatch.setattr(LocalFileIO, "write_bytes", puffin_fails)
    with pytest.raises(Boom):
        case.run()
    monkeypatch.undo()
    assert published  # a file was finished (DVs: the Puffin file was being written) before the failure ...
    assert table_files(tbl) == files  # ... and is gone
    check_table(case, case.before, referenced)


@pytest.mark.parametrize("kind", DELETE_KINDS)
def test_delete_unknown_state_before_the_swap_keeps_every_file(tmp_path: Path, kind: str) -> None:
    case = delete_case(tmp_path, kind)
    tbl = case.tbl
    files, referenced = table_files(tbl), referenced_files(tbl)
    _, hook = raise_at("swap", CommitStateUnknown("connection lost"))
    with pytest.raises(CommitStateUnknown):
        case.run(hook)
    kept = table_files(tbl) - files
    assert files <= table_files(tbl)
    assert any(p.endswith(case.written_kind()) for p in kept)  # the delete files, and ...
    assert sum(p.endswith(".metadata.json") for p in kept) == 1  # ... the metadata file
    assert sum(Path(p).name.startswith("snap-") for p in kept) == 1
    check_table(case, case.before, referenced)  # the swap never happened


@pytest.mark.parametrize("kind", DELETE_KINDS)
def test_delete_swap_lands_but_reports_failure(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = delete_case(tmp_path, kind)
    tbl = case.tbl
    files, referenced = table_files(tbl), referenced_files(tbl)
    swap_lands_then(monkeypatch, CommitStateUnknown("the commit went through but its answer was lost"))
    with pytest.raises(CommitStateUnknown):
        case.run()
    monkeypatch.undo()
    assert files <= table_files(tbl)  # nothing deleted
    fresh = check_table(case, case.after, referenced)  # the new state, whole
    if not kind.startswith("eq"):  # PyIceberg reads no equality deletes, DuckDB fails on NULL keys
        assert_all_readers(fresh, case.after)
    assert referenced_files(fresh) <= table_files(tbl)


@pytest.mark.parametrize("kind", DELETE_KINDS)
def test_delete_cleanup_failure_does_not_fail_the_commit(tmp_path: Path, kind: str) -> None:
    case = delete_case(tmp_path, kind)
    referenced = referenced_files(case.tbl)
    seen: list[str] = []

    def hook(stage: str) -> None:
        seen.append(stage)
        if stage == "swap" and seen.count("swap") == 1:
            raise CommitConflict("lost a race")
        if stage == "cleanup":
            raise Boom("cleanup crashed")

    result = case.run(hook)
    assert isinstance(result, DeleteResult) and result.commit is not None
    assert "cleanup" in seen and result.commit.attempts == 2
    orphaned = result.commit.orphaned
    assert orphaned and all(Path(p).exists() for p in orphaned)  # attempt 1's list and metadata at least
    fresh = check_table(case, case.after, referenced)
    assert not set(orphaned) & referenced_files(fresh)


# -- expire_snapshots --------------------------------------------------------------------------------------


def expire_case(tmp_path: Path) -> tuple[SqlCatalog, Table, pa.Table, int]:
    """Four snapshots (append, append, delete of the first append's rows, append) and the time after
    them: expiring with ``retain_last=1`` drops three snapshots and the files only they reach."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **FAST_RETRIES})
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 10))
    tbl.delete("id < 10")
    tbl.append(rows(20, 5))
    expected = pa.concat_tables([rows(10, 10), rows(20, 5)])
    return cat, tbl, expected, max(s.timestamp_ms for s in tbl.metadata.snapshots) + 1


def check_expired(cat: SqlCatalog, expected: pa.Table, referenced: set[str], *, landed: bool) -> Table:
    """The catalog's table reads ``expected``; with ``landed`` it has one snapshot, else all four; every
    file its snapshots reference exists, and (not landed) every file referenced before."""
    fresh = cat.load_table("db.t")
    assert_same_rows(ours(fresh), expected, context="gpu_engine scan after expire")
    assert len(fresh.metadata.snapshots) == (1 if landed else 4)
    kept = referenced_files(fresh)
    assert not {p for p in kept if not Path(p).exists()}
    if not landed:
        assert kept == referenced
    return fresh


@pytest.mark.parametrize("stage", ["metadata", "swap"])
def test_expire_definite_failure_deletes_nothing_but_its_metadata(tmp_path: Path, stage: str) -> None:
    cat, tbl, expected, after = expire_case(tmp_path)
    location, files, referenced = tbl.metadata_location, table_files(tbl), referenced_files(tbl)
    seen, hook = raise_at(stage, Boom(stage))
    with pytest.raises(Boom):
        tbl.expire_snapshots(older_than=after, retain_last=1, faults=hook)
    assert seen == ["metadata", "swap"][: seen.index(stage) + 1] and seen[-1] == stage
    assert tbl.metadata_location == location
    assert table_files(tbl) == files  # no data, manifest or list deleted; the attempt's metadata gone
    check_expired(cat, expected, referenced, landed=False)
    result = tbl.expire_snapshots(older_than=after, retain_last=1)  # still expires afterwards
    assert len(result.expired_snapshot_ids) == 3 and len(result.deleted_manifest_lists) == 3
    check_expired(cat, expected, referenced, landed=True)


def test_expire_unknown_state_before_the_swap_keeps_every_file(tmp_path: Path) -> None:
    cat, tbl, expected, after = expire_case(tmp_path)
    files, referenced = table_files(tbl), referenced_files(tbl)
    _, hook = raise_at("swap", CommitStateUnknown("connection lost"))
    with pytest.raises(CommitStateUnknown):
        tbl.expire_snapshots(older_than=after, retain_last=1, faults=hook)
    new = table_files(tbl) - files
    assert files <= table_files(tbl) and len(new) == 1 and new.pop().endswith(".metadata.json")
    check_expired(cat, expected, referenced, landed=False)


def test_expire_swap_lands_but_reports_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat, tbl, expected, after = expire_case(tmp_path)
    files = table_files(tbl)
    swap_lands_then(monkeypatch, OSError("socket closed"))
    with pytest.raises(CommitStateUnknown, match="socket closed"):
        tbl.expire_snapshots(older_than=after, retain_last=1)
    monkeypatch.undo()
    assert files <= table_files(tbl)  # the files of the expired snapshots are all still there
    fresh = check_expired(cat, expected, set(), landed=True)
    assert_all_readers(fresh, expected)


@pytest.mark.parametrize("error", [Boom("cleanup crashed"), Interrupted()])
def test_expire_cleanup_failure_after_the_commit_deletes_nothing(
    tmp_path: Path, error: BaseException
) -> None:
    cat, tbl, expected, after = expire_case(tmp_path)
    files, referenced = table_files(tbl), referenced_files(tbl)
    seen, hook = raise_at("cleanup", error)
    undeleted: set[str] = set()
    if isinstance(error, Exception):  # cleanup skipped: the commit stands, the files are reported
        result = tbl.expire_snapshots(older_than=after, retain_last=1, faults=hook)
        assert len(result.expired_snapshot_ids) == 3
        assert not result.deleted_data_files and not result.deleted_manifest_lists
        undeleted = set(result.undeleted)
        assert undeleted and undeleted <= referenced
    else:
        with pytest.raises(Interrupted):
            tbl.expire_snapshots(older_than=after, retain_last=1, faults=hook)
    assert seen == ["metadata", "swap", "cleanup"]
    assert files <= table_files(tbl)  # nothing deleted
    fresh = check_expired(cat, expected, referenced, landed=True)
    assert not undeleted & referenced_files(fresh)


def test_expire_deletion_errors_never_touch_kept_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some deletions fail after the commit landed: the rest go on, and every kept snapshot's file stays."""
    cat, tbl, expected, after = expire_case(tmp_path)
    referenced = referenced_files(tbl)
    real_delete = LocalFileIO.delete
    tried: list[str] = []

    def every_other_fails(self: LocalFileIO, path: str, *, missing_ok: bool = False) -> None:
        tried.append(path)
        if len(tried) % 2:
            raise OSError(f"cannot delete {path}")
        real_delete(self, path, missing_ok=missing_ok)

    monkeypatch.setattr(LocalFileIO, "delete", every_other_fails)
    result = tbl.expire_snapshots(older_than=after, retain_last=1)
    monkeypatch.undo()
    fresh = check_expired(cat, expected, referenced, landed=True)
    kept = referenced_files(fresh)
    assert len(tried) >= 4 and result.undeleted
    assert not set(tried) & kept  # a kept snapshot's file was never even tried
    assert all(Path(p).exists() for p in result.undeleted)
    assert not any(Path(p).exists() for p in set(tried) - set(result.undeleted))


def test_expire_lost_race_removes_the_attempts_metadata(tmp_path: Path) -> None:
    cat, tbl, expected, after = expire_case(tmp_path)
    files, referenced = table_files(tbl), referenced_files(tbl)
    seen, hook = raise_at("swap", CommitConflict("lost a race"))
    result = tbl.expire_snapshots(older_than=after, retain_last=1, faults=hook)
    assert seen.count("swap") == 2 and len(result.expired_snapshot_ids) == 3
    fresh = check_expired(cat, expected, referenced, landed=True)
    gone = files - table_files(tbl)
    assert gone and not gone & referenced_files(fresh)
    new = table_files(tbl) - files
    assert new == {fresh.metadata_location}  # attempt 1's metadata file is gone
