"""Compaction on Spark (local[2,2]) against single-process compaction: same rows, same number of files
and the same metrics, on built tables and on a real fixture table (Dremio's, with position and equality
deletes); injected task failures are retried without duplicate data; a group that keeps failing does not
block the others under partial progress; a concurrent delete is validated as in a single process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gpu_engine as ge
from gpu_engine.commit.compact import CompactionResult
from gpu_engine.errors import InvalidOption, UnsupportedFeature, ValidationError
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.spark import GroupRewriteFailed, compact
from gpu_engine.spark.runner import first_line
from gpu_engine.table import Table
from gpu_engine.tasks import FileGroup, RewriteResult

from ..commit._fixture_copy import committable_copy, tree_state
from ..commit._support import avro_entries
from ..planning._support import FIXTURES

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("x", pa.float64())])


def _build(cat: Any, name: str, version: int, kind: str) -> Table:
    tbl: Table = cat.create_table(
        f"db.{name}",
        schema=SCHEMA,
        partition_spec=["bucket(2, id)"],
        properties={"format-version": str(version)},
    )
    rng = np.random.default_rng(7)
    for i in range(6):
        ids = np.arange(i * 50, (i + 1) * 50, dtype=np.int64)
        names = [None if j % 11 == 0 else f"n{j % 7}" for j in range(50)]
        tbl.append(pa.table({"id": ids, "name": names, "x": rng.normal(size=50)}, schema=SCHEMA))
    if kind in ("position", "mixed"):
        tbl.delete("id in (1, 2, 77, 150, 299)")
    if kind in ("equality", "mixed"):
        tbl.delete_rows(pa.table({"id": pa.array([5, 6, 180], pa.int64())}), on=["id"])
    return tbl


def _catalog(tmp_path: Path) -> Any:
    cat = ge.load_catalog("spark", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    return cat


def _metrics(files: list[ContentFile]) -> list[tuple[Any, ...]]:
    return sorted(
        (f.record_count, f.partition, sorted(f.value_counts.items()), sorted(f.null_value_counts.items()),
         sorted(f.lower_bounds.items()), sorted(f.upper_bounds.items()))
        for f in files
    )  # fmt: skip


def _added(result: CompactionResult, tbl: Table) -> list[ContentFile]:
    from gpu_engine.commit.entries import live_entries, snapshot_manifests

    snap = tbl.metadata.snapshot_by_id(result.commits[0].snapshot_id)
    out = []
    for m in snapshot_manifests(tbl.io, snap):
        if m.added_snapshot_id == snap.snapshot_id and not m.is_delete_manifest:
            out += [e.file for e in live_entries(tbl.io, m, tbl.metadata.spec_by_id(m.partition_spec_id or 0))
                    if e.snapshot_id == snap.snapshot_id]  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("version", "kind"), [(2, "position"), (3, "position"), (2, "equality"), (3, "mixed")]
)
def test_same_result_as_single_process(spark: Any, tmp_path: Path, version: int, kind: str) -> None:
    cat = _catalog(tmp_path)
    local, distributed = _build(cat, "local", version, kind), _build(cat, "dist", version, kind)
    expected = local.scan().to_arrow().sort_by("id")
    options = {"min-input-files": "2"}
    one = local.compact(options=options, backend="cpu")
    many = compact(spark, distributed, options=options, backend="cpu")
    assert distributed.scan().to_arrow().sort_by("id").equals(expected)
    assert local.scan().to_arrow().sort_by("id").equals(expected)
    assert (many.rewritten_data_files, many.added_data_files, many.removed_delete_files) == (
        one.rewritten_data_files, one.added_data_files, one.removed_delete_files,
    )  # fmt: skip
    assert len(many.commits) == len(one.commits) == 1
    assert _metrics(_added(many, distributed)) == _metrics(_added(one, local))


def test_executors_rewrite_through_the_parquet_path_asked_for(spark: Any, tmp_path: Path) -> None:
    """``parquet_io`` travels with each group to the executors ("arrow-frames": the cuDF path's steps with
    pyarrow), with the same result as in one process."""
    cat = _catalog(tmp_path)
    local, distributed = _build(cat, "local", 3, "mixed"), _build(cat, "dist", 3, "mixed")
    options = {"min-input-files": "2"}
    one = local.compact(options=options, backend="cpu", parquet_io="arrow-frames")
    many = compact(spark, distributed, options=options, backend="cpu", parquet_io="arrow-frames")
    assert {g.parquet_io for g in many.groups} == {g.parquet_io for g in one.groups} == {"arrow"}
    assert distributed.scan().to_arrow().sort_by("id").equals(local.scan().to_arrow().sort_by("id"))
    assert _metrics(_added(many, distributed)) == _metrics(_added(one, local))


# Dremio's products table (SOURCES.md): 1000 rows in 5 data files partitioned by category (widget and
# gizmo 2 files each, gadget 1); equality deletes of product ids 0-29, five 100-id ranges and color 'green',
# then a position delete of product ids 50-52 (in widget's files): 450 rows remain.
PRODUCTS = "fixtures/dremio-oss/iceberg/v2/products_with_eq_deletes"


def _live_files(tbl: Table, content: int) -> dict[str, str]:
    """The current snapshot's live data (content 0) or delete (1) files -> their partition's category,
    read with fastavro (manifest list, then each manifest's entries not DELETED)."""
    snap = tbl.metadata.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    with open(snap.manifest_list, "rb") as f:
        manifests = [m for m in fastavro.reader(f) if isinstance(m, dict)]
    return {
        e["data_file"]["file_path"]: e["data_file"]["partition"]["category"]
        for m in manifests
        if m["content"] == content
        for e in avro_entries(m["manifest_path"])
        if e["status"] != 2
    }


def test_same_result_as_single_process_on_a_fixture_table(spark: Any, tmp_path: Path) -> None:
    """Two copies of a real table with position and equality deletes, one compacted on Spark and one in
    this process (groups of 2+ files, dangling deletes removed): both keep the table's rows (those the
    fixture's description gives), and both drop the same delete files, those of the partitions whose
    files were rewritten (the position delete and the equality deletes older than the new files; the
    partition with one file keeps its equality delete)."""
    before_fixture = tree_state(FIXTURES / PRODUCTS.removeprefix("fixtures/"))
    local = committable_copy(PRODUCTS, tmp_path / "local")
    distributed = committable_copy(PRODUCTS, tmp_path / "spark")
    expected = local.scan().to_arrow().sort_by("product_id")
    ids = expected["product_id"]
    assert expected.num_rows == 450
    assert not pc.any(pc.or_(pc.less(ids, 30), pc.is_in(ids, pa.array([50, 51, 52], ids.type)))).as_py()
    assert distributed.scan().to_arrow().sort_by("product_id").equals(expected)

    data = _live_files(local, 0)
    deletes = _live_files(local, 1)
    assert sorted(data.values()) == ["gadget", "gizmo", "gizmo", "widget", "widget"]
    assert len(deletes) == 7
    assert _live_files(distributed, 1) == deletes
    rewritten = {c for c in data.values() if list(data.values()).count(c) >= 2}
    dropped = {p for p, c in deletes.items() if c in rewritten}

    options = {"min-input-files": "2", "remove-dangling-deletes": "true"}
    one = local.compact(options=options, backend="cpu")
    many = compact(spark, distributed, options=options, backend="cpu")

    for tbl in (local, distributed):
        assert tbl.scan().to_arrow().sort_by("product_id").equals(expected)
        assert set(deletes) - set(_live_files(tbl, 1)) == dropped
        assert set(_live_files(tbl, 1)) == set(deletes) - dropped  # none added
        assert sorted(_live_files(tbl, 0).values()) == ["gadget", "gizmo", "widget"]
    assert len(dropped) == 6
    summary = ("rewritten_data_files", "added_data_files", "removed_delete_files", "dangling_deletes_removed")
    assert [getattr(many, k) for k in summary] == [getattr(one, k) for k in summary] == [4, 2, 6, 5]
    assert _metrics(_added(many, distributed)) == _metrics(_added(one, local))
    assert tree_state(FIXTURES / PRODUCTS.removeprefix("fixtures/")) == before_fixture


def test_failed_attempts_are_retried_without_duplicates(spark: Any, tmp_path: Path) -> None:
    tbl = _build(_catalog(tmp_path), "t", 3, "position")
    expected = tbl.scan().to_arrow().sort_by("id")
    result = compact(spark, tbl, options={"min-input-files": "2"}, backend="cpu", fail_attempts={0: 1, 1: 1})
    assert not result.failures and len(result.groups) == 2
    assert tbl.scan().to_arrow().sort_by("id").equals(expected)
    data_files = {t.file.path for t in tbl.scan().plan().tasks}
    assert len(data_files) == result.added_data_files == 2
    # nothing written twice: the data directory holds the table's files and the old, replaced ones only
    orphans = tbl.remove_orphan_files(older_than=2**62, dry_run=True)
    assert not [p for p in orphans if p.endswith(".parquet") and "deletes" not in p]


def test_a_killed_attempt_leaves_orphans_not_duplicates(spark: Any, tmp_path: Path) -> None:
    tbl = _build(_catalog(tmp_path), "t", 2, "mixed")
    expected = tbl.scan().to_arrow().sort_by("id")
    result = compact(
        spark,
        tbl,
        options={"min-input-files": "2"},
        backend="cpu",
        fail_attempts={1: 1},
        crash_after_write=True,
    )
    assert not result.failures and result.added_data_files == 2
    assert tbl.scan().to_arrow().sort_by("id").equals(expected)
    live = {t.file.path for t in tbl.scan().plan().tasks}
    orphans = [p for p in tbl.remove_orphan_files(older_than=2**62, dry_run=True) if p.endswith(".parquet")]
    written = [p for p in orphans if "deletes" not in p and p not in live]
    # the killed attempt's file is reported as an orphan (with the files the compaction replaced)
    replaced = {f.path for g in result.plan.groups for f in g.files}
    assert len([p for p in written if p not in replaced and p.removeprefix("file://") not in replaced]) == 1


def test_a_group_that_keeps_failing_does_not_block_the_others(spark: Any, tmp_path: Path) -> None:
    tbl = _build(_catalog(tmp_path), "t", 2, "position")
    expected = tbl.scan().to_arrow().sort_by("id")
    options = {"min-input-files": "2", "partial-progress.enabled": "true"}
    result = compact(spark, tbl, options=options, backend="cpu", fail_attempts={0: 99})
    assert [f.group_index for f in result.failures] == [0]
    assert "injected failure" in result.failures[0].error
    assert [g.group_index for g in result.groups] == [1]
    assert tbl.scan().to_arrow().sort_by("id").equals(expected)
    with pytest.raises(GroupRewriteFailed, match="injected failure"):
        compact(spark, tbl, options={"min-input-files": "2"}, backend="cpu", fail_attempts={0: 99})


def test_an_executors_error_is_reported_as_raised(spark: Any, tmp_path: Path) -> None:
    """The Python error of the executor, whatever its class name (gpu-engine's errors end in neither Error
    nor Exception), not Spark's wrapping; a bad backend name is refused before any job runs."""
    variant = committable_copy("fixtures/impala/iceberg_test/iceberg_v3/trino_variant", tmp_path / "v")
    with pytest.raises(
        GroupRewriteFailed, match="failed: UnsupportedFeature: column 'v': writing Iceberg variant columns"
    ):
        compact(spark, variant, options={"rewrite-all": "true"}, backend="cpu")
    tbl = _build(_catalog(tmp_path), "t", 2, "position")
    with pytest.raises(UnsupportedFeature, match="backend='gpu': expected one of"):
        compact(spark, tbl, options={"min-input-files": "2"}, backend="gpu")


def test_the_reported_error_is_the_exception_line_of_the_python_traceback() -> None:
    python = (
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "/w/worker.py", line 1, in main\n'
        "    raise InvalidData('row 3: x')\n"
        "gpu_engine.errors.InvalidData: row 3: x\n"
        "\nJVM stacktrace:\norg.apache.spark.SparkException: Job aborted\n\tat org.apache.X(X.java:1)\n"
    )
    assert first_line(Exception(python)) == "InvalidData: row 3: x"
    crashed = (
        "An error occurred while calling o8313.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed 4 times, "
        "most recent failure: Lost task 0.3: org.apache.spark.SparkException: Python worker exited "
        "unexpectedly (crashed)\n"
        "\tat org.apache.spark.api.python.BasePythonRunner(PythonRunner.scala:1)\n"
    )
    assert first_line(Exception(crashed)) == "Python worker exited unexpectedly (crashed)"
    java = "Job failed\nCaused by: java.io.IOException: disk full\n\tat x.y(Z.java:1)"
    assert first_line(Exception(java)) == "Caused by: java.io.IOException: disk full"


class _ConcurrentDelete:
    """Commits a DV through another handle as soon as the first group is rewritten."""

    def __init__(self, other: Table, where: str):
        self.other, self.where, self.done = other, where, False

    def group_started(self, group: FileGroup) -> None:
        return None

    def group_finished(self, group: FileGroup, result: RewriteResult | None, error: str | None) -> None:
        if not self.done:
            self.done = True
            self.other.delete(self.where)


def test_concurrent_delete_is_validated_as_in_one_process(spark: Any, tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    tbl = _build(cat, "t", 3, "position")
    expected = tbl.scan().to_arrow()
    expected = expected.filter(
        pa.compute.invert(pa.compute.is_in(expected["id"], pa.array([3, 4], pa.int64())))
    )
    race = _ConcurrentDelete(cat.load_table("db.t"), "id in (3, 4)")
    with pytest.raises(ValidationError, match="this compaction"):
        compact(spark, tbl, options={"min-input-files": "2"}, backend="cpu", progress=race,
                sort_order=None)  # fmt: skip
    tbl.refresh()
    assert tbl.scan().to_arrow().sort_by("id").equals(expected.sort_by("id"))


class _Spark:
    """Just enough of a session for compact's defaults; any job it started would fail the test."""

    class sparkContext:  # noqa: N801 (Spark's name)
        defaultParallelism = 2  # noqa: N815

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"spark.{name} was used before the options were checked")


@pytest.mark.parametrize("options", ["x", "min-input-files=2", [("min-input-files", "2")], 5])
def test_options_that_are_not_a_mapping_are_refused_on_the_driver(tmp_path: Path, options: Any) -> None:
    """A string was iterated into dict() ('dictionary update sequence element #0 has length 1')."""
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([("id", pa.int64())]))
    with pytest.raises(InvalidOption, match=r"options=.*: expected a mapping \(a dict\)"):
        compact(_Spark(), tbl, options=options)
