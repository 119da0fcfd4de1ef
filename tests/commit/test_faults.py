"""Fault injection at every stage of an append: the table stays readable and equal to the old state (or the
new one when the swap landed), no file any snapshot references is deleted, and the files of a definitely
failed commit are removed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import gpu_engine as ge
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.errors import CommitConflict, CommitStateUnknown
from gpu_engine.table import Table

from ._support import assert_all_readers, referenced_files, rows, sql_catalog, table_files

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


def raise_at(stage: str, error: BaseException, times: int = 1) -> tuple[list[str], object]:
    seen: list[str] = []
    left = [times]

    def hook(name: str) -> None:
        seen.append(name)
        if name == stage and left[0] > 0:
            left[0] -= 1
            raise error

    return seen, hook


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
        tbl.append(rows(20, 15), faults=hook)  # type: ignore[arg-type]
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
        tbl.append(rows(20, 15), faults=hook)  # type: ignore[arg-type]
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
    real = SqlCatalog.commit_metadata

    def lands_then_fails(self: SqlCatalog, identifier: object, expected: str | None, new: str) -> str:
        real(self, identifier, expected, new)  # type: ignore[arg-type]
        raise CommitStateUnknown("the commit went through but its answer was lost")

    monkeypatch.setattr(SqlCatalog, "commit_metadata", lands_then_fails)
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
    real = SqlCatalog.commit_metadata

    def lands_then_breaks(self: SqlCatalog, identifier: object, expected: str | None, new: str) -> str:
        real(self, identifier, expected, new)  # type: ignore[arg-type]
        raise OSError("socket closed")

    monkeypatch.setattr(SqlCatalog, "commit_metadata", lands_then_breaks)
    with pytest.raises(CommitStateUnknown, match="socket closed"):
        tbl.append(rows(20, 15))
    monkeypatch.undo()
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


def test_failed_attempts_are_cleaned_after_success(tmp_path: Path) -> None:
    cat, tbl, first = setup(tmp_path)
    before = table_files(tbl)
    _, hook = raise_at("swap", CommitConflict("lost a race"), times=2)
    result = tbl.append(rows(20, 15), faults=hook)  # type: ignore[arg-type]
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
        tbl.append(rows(20, 15), faults=hook)  # type: ignore[arg-type]
    assert seen.count("swap") == 5  # commit.retry.num-retries = 4
    assert table_files(tbl) == before
    assert_intact(cat, tbl, first)


class Interrupted(BaseException):  # like KeyboardInterrupt: not an Exception
    pass


def test_interruption_during_the_swap_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, tbl, first = setup(tmp_path)
    real = SqlCatalog.commit_metadata

    def lands_then_interrupted(self: SqlCatalog, identifier: object, expected: str | None, new: str) -> str:
        real(self, identifier, expected, new)  # type: ignore[arg-type]
        raise Interrupted

    monkeypatch.setattr(SqlCatalog, "commit_metadata", lands_then_interrupted)
    with pytest.raises(Interrupted):
        tbl.append(rows(20, 15))
    monkeypatch.undo()
    assert_intact(cat, tbl, pa.concat_tables([first, rows(20, 15)]))


def test_interruption_before_the_swap_cleans_up(tmp_path: Path) -> None:
    cat, tbl, first = setup(tmp_path)
    before = table_files(tbl)
    _, hook = raise_at("metadata", Interrupted())
    with pytest.raises(Interrupted):
        tbl.append(rows(20, 15), faults=hook)  # type: ignore[arg-type]
    assert table_files(tbl) == before
    assert_intact(cat, tbl, first)


def test_bad_retry_property_fails_before_committing_and_removes_data(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"commit.retry.num-retries": "many"})
    with pytest.raises(ge.errors.InvalidProperty, match=r"commit\.retry\.num-retries='many'"):
        tbl.append(rows(0, 5))
    assert not list(Path(tbl.location).rglob("*.parquet"))
    assert cat.load_table("db.t").metadata.current_snapshot_id is None
