"""Faults during a compaction: a group that fails to rewrite (before or in the middle of writing its files),
a commit failing at each producer stage, retries running out, an unknown commit state (before the swap, and
a swap that lands but reports failure), and a process killed with SIGKILL while it writes or commits. In
every case the table stays readable with the pre-compaction rows (or the compacted ones, where the commit
landed), no file a snapshot references is deleted, and the files of definitely failed work are removed."""

from __future__ import annotations

import importlib
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit.compact import CompactionFailed, _Run
from gpu_engine.errors import CommitConflict, CommitStateUnknown
from gpu_engine.execute.rewrite import rewrite_group as real_rewrite_group
from gpu_engine.io.parquet_write import write_data_files as real_write_data_files
from gpu_engine.table import Table
from gpu_engine.tasks import FileGroup

from ._compact_support import (
    assert_no_stray_data_files,
    assert_nothing_referenced_is_missing,
    assert_rows_equal,
    data_files,
    gen_rows,
    new_table,
    parquet_files_on_disk,
    replace_snapshots,
)
from ._support import Interrupted, interrupted_at, lines_between, raise_at, swap_lands_then, table_files

REPO = Path(__file__).resolve().parents[2]
PARTIAL = {"partial-progress.enabled": "true", "partial-progress.max-commits": "3"}


class Boom(RuntimeError):
    pass


def setup(tmp_path: Path, version: int = 3) -> tuple[SqlCatalog, Table, pa.Table]:
    """Three partitions (one compaction group each) of four small files."""
    cat, tbl = new_table(tmp_path, version, partitioned=True)
    parts = [gen_rows(i * 30, 30, seed=i) for i in range(4)]
    for p in parts:
        tbl.append(p)
    tbl.delete("id in (1, 2, 50, 51, 100)", backend="cpu")
    expected = tbl.scan(backend="cpu").to_arrow()
    assert expected.num_rows == 115
    return cat, tbl, expected


def options(partial: bool, **extra: str) -> dict[str, str]:
    return {"rewrite-all": "true", **(PARTIAL if partial else {}), **extra}


def assert_intact(cat: SqlCatalog, expected: pa.Table) -> Table:
    """The catalog's table reads ``expected``, every referenced file exists, and it still compacts."""
    fresh = cat.load_table("db.t")
    assert_rows_equal(fresh.scan(backend="cpu").to_arrow(), expected)
    assert_nothing_referenced_is_missing(fresh)
    return fresh


def assert_still_compacts(cat: SqlCatalog, expected: pa.Table) -> None:
    fresh = cat.load_table("db.t")
    result = fresh.compact(options=options(False), backend="cpu")
    assert result.commits and not result.failures
    assert_rows_equal(fresh.scan(backend="cpu").to_arrow(), expected)
    assert_nothing_referenced_is_missing(fresh)


# -- a group that fails to rewrite -----------------------------------------------------------------------


def patch_rewrite_group(monkeypatch: pytest.MonkeyPatch, fake: Callable[..., Any]) -> None:
    """Replace ``rewrite_group`` where the compaction calls it (``gpu_engine.commit.compact``, or the
    group runner it hands groups to, or the module choosing the Parquet path)."""
    patched = 0
    for name in (
        "gpu_engine.commit.compact",
        "gpu_engine.execute.group_runner",
        "gpu_engine.execute.group_rewrite",
    ):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "rewrite_group"):
            monkeypatch.setattr(module, "rewrite_group", fake)
            patched += 1
    assert patched, "rewrite_group is called from nowhere known"


def failing_group(monkeypatch: pytest.MonkeyPatch, index: int, error: BaseException) -> list[int]:
    """Make ``rewrite_group`` raise for the group ``index``; returns the indexes rewritten."""
    real = real_rewrite_group
    calls: list[int] = []

    def rewrite_group(md: Any, io: Any, group: FileGroup, *args: Any, **kwargs: Any) -> Any:
        calls.append(group.index)
        if group.index == index:
            raise error
        return real(md, io, group, *args, **kwargs)

    patch_rewrite_group(monkeypatch, rewrite_group)
    return calls


def test_failed_rewrite_without_partial_progress_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, tbl, expected = setup(tmp_path)
    before = table_files(tbl)
    calls = failing_group(monkeypatch, 1, Boom("group 1 cannot be read"))
    with pytest.raises(Boom):
        tbl.compact(options=options(False), backend="cpu")
    assert calls == [0, 1]  # group 0 was written ...
    assert table_files(tbl) == before  # ... and its files deleted
    fresh = assert_intact(cat, expected)
    assert replace_snapshots(fresh) == 0
    monkeypatch.undo()
    assert_still_compacts(cat, expected)


def test_interrupted_rewrite_deletes_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, tbl, expected = setup(tmp_path)
    before = table_files(tbl)
    failing_group(monkeypatch, 2, Interrupted())
    with pytest.raises(Interrupted):
        tbl.compact(options=options(False), backend="cpu")
    assert table_files(tbl) == before
    assert_intact(cat, expected)


def test_failed_rewrite_with_partial_progress_commits_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, tbl, expected = setup(tmp_path)
    plan = tbl.compact(options=options(True), dry_run=True).plan
    failing_group(monkeypatch, 1, Boom("group 1 cannot be read"))
    result = tbl.compact(options=options(True), backend="cpu")
    assert [(f.group_index, f.stage) for f in result.failures] == [(1, "rewrite")]
    assert "Boom: group 1 cannot be read" in result.failures[0].error
    assert sorted(g.group_index for g in result.groups) == [0, 2] and len(result.commits) == 2
    fresh = assert_intact(cat, expected)
    assert {f.path for f in plan.groups[1].files} <= set(data_files(fresh))  # group 1 untouched
    assert_no_stray_data_files(fresh)
    monkeypatch.undo()
    assert_still_compacts(cat, expected)


def test_a_failed_rewrite_counts_against_max_failed_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in Iceberg Java, failed commits are the planned commits that did not land, whatever failed."""
    cat, tbl, expected = setup(tmp_path)
    failing_group(monkeypatch, 1, Boom("group 1 cannot be read"))
    strict = options(True, **{"partial-progress.max-failed-commits": "0"})
    with pytest.raises(CompactionFailed, match="1 of 3 commit") as info:
        tbl.compact(options=strict, backend="cpu")
    assert sorted(g.group_index for g in info.value.result.groups) == [0, 2]  # what landed stays landed
    assert_intact(cat, expected)


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_failed_rewrite_among_concurrent_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partial: bool
) -> None:
    """Three groups rewritten at once; the middle one fails once the other two have written their files:
    those are committed (partial progress) or deleted, never left behind."""
    cat, tbl, expected = setup(tmp_path)
    before = table_files(tbl)
    others_done = threading.Event()
    done: list[int] = []
    lock = threading.Lock()

    def rewrite_group(md: Any, io: Any, group: FileGroup, *args: Any, **kwargs: Any) -> Any:
        if group.index == 1:
            assert others_done.wait(120), "groups 0 and 2 did not finish"
            raise Boom("group 1 cannot be read")
        out = real_rewrite_group(md, io, group, *args, **kwargs)
        with lock:
            done.append(group.index)
            if len(done) == 2:
                others_done.set()
        return out

    patch_rewrite_group(monkeypatch, rewrite_group)
    opts = options(partial, **{"max-concurrent-file-group-rewrites": "3"})
    if partial:
        result = tbl.compact(options=opts, backend="cpu")
        assert [(f.group_index, f.stage) for f in result.failures] == [(1, "rewrite")]
        assert sorted(g.group_index for g in result.groups) == [0, 2]
        fresh = assert_intact(cat, expected)
        assert replace_snapshots(fresh) == len(result.commits) >= 1
        assert_no_stray_data_files(fresh)
    else:
        with pytest.raises(Boom):
            tbl.compact(options=opts, backend="cpu")
        assert table_files(tbl) == before  # groups 0 and 2 wrote files: deleted
        assert replace_snapshots(assert_intact(cat, expected)) == 0
    assert sorted(done) == [0, 2]


def test_more_failed_commits_than_allowed_raise_after_the_rest_landed(tmp_path: Path) -> None:
    cat, tbl, expected = setup(tmp_path)
    _, hook = raise_at("metadata", Boom("no"))
    with pytest.raises(CompactionFailed, match="max-failed-commits=0") as info:
        tbl.compact(options=options(True, **{"partial-progress.max-failed-commits": "0"}), faults=hook)
    assert [(f.group_index, f.stage) for f in info.value.result.failures] == [(0, "commit")]
    assert len(info.value.result.commits) == 2  # what landed stays landed
    fresh = assert_intact(cat, expected)
    assert replace_snapshots(fresh) == 2
    assert_no_stray_data_files(fresh)


@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_failure_in_the_middle_of_writing_a_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strategy: str
) -> None:
    """The writer fails on the group's second output file: the first, complete one is deleted too."""
    cat, tbl, expected = setup(tmp_path, 2)
    real = real_write_data_files
    written: list[set[str]] = []

    def write_data_files(io: Any, location: str, schema: Any, spec: Any, batches: Any, **kw: Any) -> Any:
        written.append(parquet_files_on_disk(tbl))
        if len(written) == 2:
            batches = _fail_after_first(batches)
        return real(io, location, schema, spec, batches, **kw)

    monkeypatch.setattr("gpu_engine.execute.rewrite.write_data_files", write_data_files)
    before = table_files(tbl)
    size = sum(os.path.getsize(f) for f in data_files(tbl))
    order = "id" if strategy == "sort" else None
    opts = options(False, **{"target-file-size-bytes": str(size // 12)})
    with pytest.raises(Boom, match="disk full"):
        tbl.compact(strategy, sort_order=order, options=opts, backend="cpu")
    assert len(written) == 2 and len(written[1] - written[0]) == 1  # one file was complete
    assert table_files(tbl) == before
    assert_intact(cat, expected)


def _fail_after_first(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in batches:
        yield b
        raise Boom("disk full")


# -- the commit fails ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["manifest", "manifest-list", "metadata", "swap"])
@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_commit_failing_at_each_stage(tmp_path: Path, stage: str, partial: bool) -> None:
    cat, tbl, expected = setup(tmp_path)
    before = table_files(tbl)
    seen, hook = raise_at(stage, Boom(stage))
    if partial:  # the first group's commit fails, the other two land
        result = tbl.compact(options=options(True), faults=hook, backend="cpu")
        assert [(f.stage, f.error) for f in result.failures] == [("commit", f"Boom: {stage}")]
        assert len(result.commits) == 2
        fresh = assert_intact(cat, expected)
        assert replace_snapshots(fresh) == 2
        assert_no_stray_data_files(fresh)
        failed = result.failures[0].group_index
        assert failed not in {g.group_index for g in result.groups}
    else:
        with pytest.raises(Boom, match=stage):
            tbl.compact(options=options(False), faults=hook, backend="cpu")
        assert table_files(tbl) == before  # data files, manifests, list, metadata: all removed
        fresh = assert_intact(cat, expected)
        assert replace_snapshots(fresh) == 0
    assert stage in seen
    assert_still_compacts(cat, expected)


def test_retries_exhausted_remove_everything(tmp_path: Path) -> None:
    cat, tbl, expected = setup(tmp_path)
    before = table_files(tbl)
    seen, hook = raise_at("swap", CommitConflict("always lost"), times=100)
    with pytest.raises(CommitConflict, match="after 5 attempt"):
        tbl.compact(options=options(False), faults=hook, backend="cpu")
    assert seen.count("swap") == 5
    assert table_files(tbl) == before
    assert_intact(cat, expected)


def test_lost_race_then_failing_cleanup_still_commits(tmp_path: Path) -> None:
    cat, tbl, expected = setup(tmp_path)
    seen: list[str] = []

    def hook(stage: str) -> None:
        seen.append(stage)
        if stage == "swap" and seen.count("swap") == 1:
            raise CommitConflict("lost a race")
        if stage == "cleanup":
            raise Boom("cleanup crashed")

    result = tbl.compact(options=options(False), faults=hook, backend="cpu")
    assert "cleanup" in seen
    (commit,) = result.commits
    assert commit.attempts == 2 and commit.orphaned  # attempt 1's list and metadata file, left behind
    fresh = assert_intact(cat, expected)
    assert replace_snapshots(fresh) == 1
    assert_no_stray_data_files(fresh)


# -- unknown commit state --------------------------------------------------------------------------------


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_unknown_state_before_the_swap_keeps_the_files(tmp_path: Path, partial: bool) -> None:
    cat, tbl, expected = setup(tmp_path)
    before = parquet_files_on_disk(tbl)
    _, hook = raise_at("swap", CommitStateUnknown("connection lost"))
    with pytest.raises(CommitStateUnknown):
        tbl.compact(options=options(partial), faults=hook, backend="cpu")
    kept = parquet_files_on_disk(tbl) - before
    assert kept  # the commit's data files may be the table's: never deleted
    fresh = assert_intact(cat, expected)  # the swap never ran
    assert replace_snapshots(fresh) == 0
    assert_still_compacts(cat, expected)


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_swap_lands_but_reports_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partial: bool
) -> None:
    cat, tbl, expected = setup(tmp_path)
    lineage = tbl.scan(columns=["id", "_row_id", "_last_updated_sequence_number"], backend="cpu").to_arrow()
    swap_lands_then(monkeypatch, CommitStateUnknown("the commit went through but its answer was lost"))
    with pytest.raises(CommitStateUnknown):
        tbl.compact(options=options(partial), backend="cpu")
    monkeypatch.undo()
    fresh = assert_intact(cat, expected)  # the compacted state, whole
    assert replace_snapshots(fresh) == 1
    assert_no_stray_data_files(fresh)  # partial: the groups not yet committed left nothing behind
    got = fresh.scan(columns=["id", "_row_id", "_last_updated_sequence_number"], backend="cpu").to_arrow()
    assert_rows_equal(got, lineage)
    assert_still_compacts(cat, expected)


@pytest.mark.parametrize("partial", [True, False], ids=["partial", "all-or-nothing"])
def test_interrupted_while_the_swap_lands_keeps_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partial: bool
) -> None:
    """An interruption (KeyboardInterrupt) during the catalog swap leaves its outcome unknown: here it
    landed, so the new data files are the table's and must stay (the compaction's own clean-up of
    unfinished groups deleted them, leaving a snapshot of missing files)."""
    cat, tbl, expected = setup(tmp_path)
    swap_lands_then(monkeypatch, Interrupted())
    with pytest.raises(Interrupted):
        tbl.compact(options=options(partial), backend="cpu")
    monkeypatch.undo()
    fresh = assert_intact(cat, expected)
    assert replace_snapshots(fresh) == 1
    assert_no_stray_data_files(fresh)
    assert_still_compacts(cat, expected)


# -- a killed process ------------------------------------------------------------------------------------


def _run_child(tmp_path: Path, mode: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    args = [
        sys.executable, "-m", "tests.commit._compact_child", f"sqlite:///{tmp_path / 'catalog.db'}",
        str(tmp_path / "wh"), mode, *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        args,
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the child did not reach its kill point: {line!r}\n{err[-3000:]}")


@pytest.mark.parametrize("mode", ["rewritten", "mid-write", "swap"])
def test_process_killed_mid_compaction(tmp_path: Path, mode: str) -> None:
    cat, tbl, expected = setup(tmp_path)
    referenced_before = table_files(tbl)
    data_before = parquet_files_on_disk(tbl)
    size = sum(os.path.getsize(f) for f in data_files(tbl))
    proc = _run_child(tmp_path, mode, str(size // 12))
    try:
        _wait_ready(proc)
        new = parquet_files_on_disk(tbl) - data_before
        assert new, "the child wrote no data file before its kill point"
        if mode == "swap":
            metadata = {p for p in table_files(tbl) - referenced_before if p.endswith(".metadata.json")}
            assert metadata  # the commit's metadata file was written: only the swap was missing
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert tbl.refresh().metadata_location == cat.load_table("db.t").metadata_location
    fresh = assert_intact(cat, expected)
    assert replace_snapshots(fresh) == 0
    assert referenced_before <= table_files(fresh)  # nothing was deleted: the orphans are the dead job's
    assert_still_compacts(cat, expected)


@pytest.mark.parametrize(
    "where", ["gpu_engine.commit.rewrite.RemovalScope.of_files", "gpu_engine.commit.compact.dropped_keys"]
)
@pytest.mark.parametrize("partial", [False, True], ids=["all-or-nothing", "partial"])
def test_a_failure_while_preparing_the_commit_deletes_the_new_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, partial: bool
) -> None:
    """Before the producer's commit starts (the removal scope, the delete files a group drops), a failure is
    a definite one: the group's new files go, as after a failed commit."""
    cat, tbl, expected = setup(tmp_path)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise Boom("cannot prepare the commit")

    monkeypatch.setattr(where, boom)
    if partial and where.endswith("of_files"):
        result = tbl.compact(options=options(True), backend="cpu")
        assert result.failures and all(f.stage == "commit" for f in result.failures)
    else:
        with pytest.raises(Boom):
            tbl.compact(options=options(partial), backend="cpu")
    fresh = assert_intact(cat, expected)
    assert_no_stray_data_files(fresh)
    monkeypatch.undo()
    assert_still_compacts(cat, expected)


@pytest.mark.parametrize(
    "line",
    lines_between(_Run._commit, "self.commits.append(landed)", "self.outcomes.append(", from_first=True),
)
def test_ctrl_c_just_after_a_rewrite_commit_landed_keeps_its_files(tmp_path: Path, line: int) -> None:
    """Interrupted once commit_rewrite() returned, before the group was counted: its files were still the
    compaction's to clean up, and were deleted under the table's current snapshot."""
    cat, tbl = new_table(tmp_path, 2)
    parts = [gen_rows(i * 20, 20, seed=i) for i in range(3)]
    for p in parts:
        tbl.append(p)
    with pytest.raises(KeyboardInterrupt), interrupted_at(_Run._commit, line):
        tbl.compact(options={"rewrite-all": "true"}, backend="cpu")
    landed = cat.load_table(tbl.identifier)
    assert replace_snapshots(landed) == 1
    assert_nothing_referenced_is_missing(landed)
    assert_rows_equal(landed.scan(backend="cpu").to_arrow(), pa.concat_tables(parts))
