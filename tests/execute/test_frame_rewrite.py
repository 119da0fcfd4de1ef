"""A file group rewritten through frames (the pyarrow twin of cuDF's path) writes the files the host path
writes: the same rows in the same files, the same metrics; groups the frame path does not take go to the
host path with the reason recorded. (Every fixture table is compacted through frames in
tests/commit/test_compact_fixtures.py.)"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from gpu_engine._deps import optional
from gpu_engine.errors import BackendUnavailable, InvalidOption, UnsupportedFeature
from gpu_engine.execute import frame_rewrite
from gpu_engine.execute.frame_rewrite import rewrite_group_frames
from gpu_engine.execute.frames import ArrowFrames
from gpu_engine.execute.group_rewrite import resolve_parquet_io, rewrite_file_group
from gpu_engine.execute.rewrite import rewrite_group
from gpu_engine.io.parquet_write import OVERSHOOT
from gpu_engine.table import Table
from gpu_engine.tasks import FileGroup, RewriteResult

from ..commit._compact_support import (
    _canon,
    assert_rows_equal,
    gen_rows,
    new_table,
    read_file,
    snapshot_entries,
)
from ..commit._support import sql_catalog
from .test_frame_write import METRICS


def table_with_deletes(tmp_path: Path, version: int, *, partitioned: bool = False, appends: int = 6) -> Table:
    _, tbl = new_table(tmp_path, version, partitioned=partitioned)
    for i in range(appends):
        tbl.append(gen_rows(i * 300, 300, seed=i))
    tbl.delete("id in (3, 5, 301, 302, 900, 1201)", backend="cpu")
    tbl.delete("id >= 600 and id < 640", backend="cpu")
    on = ["id", "region"] if partitioned else ["id"]  # partition-scoped keys carry the partition column
    keys = tbl.scan(filter="id in (7, 1500)", columns=on).to_arrow()
    tbl.delete_rows(keys, on=on, backend="cpu")
    return tbl


def files_of(result: RewriteResult) -> list[tuple[dict[str, Any], list[tuple[Any, ...]]]]:
    """Each file's metrics and rows in order (floats by their bits: NaN equal to NaN)."""
    return [
        (
            {m: getattr(f, m) for m in METRICS},
            [tuple(_canon(v) for v in r.values()) for r in read_file(f.path).to_pylist()],
        )
        for f in result.added
    ]


def groups(tbl: Table, **options: str) -> tuple[Any, tuple[FileGroup, ...]]:
    plan = tbl.compact(options={"rewrite-all": "true", **options}, dry_run=True).plan
    return plan, plan.groups


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("fraction", [None, 0.3, 0.45], ids=["one-file", "target-0.3", "target-0.45"])
def test_the_files_the_host_path_writes(
    tmp_path: Path, version: int, partitioned: bool, fraction: float | None
) -> None:
    tbl = table_with_deletes(tmp_path, version, partitioned=partitioned)
    options = {}
    if fraction is not None:  # several output files per group, a short last one or a tail joining it
        total = sum(t.file.file_size_in_bytes for t in tbl.scan().plan().tasks)
        options["target-file-size-bytes"] = str(int(total * fraction / (3 if partitioned else 1)))
    plan, planned = groups(tbl, **options)
    assert planned
    several = 0
    for g in planned:
        host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
        frames = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")
        assert files_of(frames) == files_of(host), g
        assert (frames.rows_read, frames.rows_written) == (host.rows_read, host.rows_written)
        assert frames.parquet_io == "arrow" and host.parquet_io == "pyarrow"
        assert all(f.spec_id == g.output_spec_id and f.partition == g.partition for f in frames.added)
        several += len(frames.added) > 1
    assert (several > 0) == (fraction is not None)


@pytest.mark.parametrize(("parts", "files"), [(2.05, 2), (2.5, 3), (1.0, 1)])
def test_a_short_tail_joins_the_file_before_it_as_on_the_host(
    tmp_path: Path, parts: float, files: int
) -> None:
    """Split sizes of ``parts`` files' worth: a remainder of at most a tenth of a file (2.05) joins the
    last full file, a larger one (2.5) is a file of its own, as the host path cuts them."""
    tbl = table_with_deletes(tmp_path, 2)
    plan, (g,) = groups(tbl)
    cut = dataclasses.replace(g, expected_output_files=3, split_size=int(g.input_bytes / parts))
    host = rewrite_group(tbl.metadata, tbl.io, cut, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, cut, plan.strategy, ArrowFrames(), backend="cpu")
    assert len(host.added) == files
    assert files_of(frames) == files_of(host)


def test_the_rest_past_the_expected_files_is_cut_at_the_maximum_size(tmp_path: Path) -> None:
    """A group whose rows outgrow its expected files (fewer were planned): the last file's rest is split
    into equal files no larger than the maximum output size (by the input's bytes per row)."""
    tbl = table_with_deletes(tmp_path, 2)
    plan, (g,) = groups(tbl)
    small = dataclasses.replace(
        g, expected_output_files=1, split_size=g.input_bytes // 4, max_output_file_size=g.input_bytes // 3
    )
    r = rewrite_group_frames(tbl.metadata, tbl.io, small, plan.strategy, ArrowFrames(), backend="cpu")
    counts = [f.record_count for f in r.added]
    assert len(counts) == 3 and max(counts) - min(counts) <= 1, counts
    assert sum(counts) == r.rows_written == r.rows_read


@pytest.mark.parametrize(
    ("strategy", "order"),
    [("sort", "name DESC NULLS LAST, id"), ("sort", "bucket(4, b), x DESC"), ("sort", "truncate(1, name)"),
     ("zorder", "a, x"), ("zorder", "name, b")],
)  # fmt: skip
@pytest.mark.parametrize("fraction", [None, 0.3], ids=["one-file", "target-0.3"])
def test_ordered_groups_write_what_the_host_path_writes(
    tmp_path: Path, strategy: str, order: str, fraction: float | None
) -> None:
    tbl = table_with_deletes(tmp_path, 3)
    tbl.replace_sort_order("name DESC NULLS LAST, id")  # files in this order record its id
    options = {"rewrite-all": "true"}
    if fraction is not None:
        total = sum(t.file.file_size_in_bytes for t in tbl.scan().plan().tasks)
        options["target-file-size-bytes"] = str(int(total * fraction))
    plan = tbl.compact(strategy, sort_order=order, options=options, dry_run=True).plan
    (g,) = plan.groups
    host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")
    assert files_of(frames) == files_of(host)
    assert [f.sort_order_id for f in frames.added] == [f.sort_order_id for f in host.added]
    assert frames.order_seconds > 0 and frames.parquet_io == "arrow"


def test_groups_the_frame_path_does_not_take_go_to_the_host_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tbl = table_with_deletes(tmp_path, 2)
    plan = tbl.compact("sort", sort_order="id", options={"rewrite-all": "true"}, dry_run=True).plan
    (g,) = plan.groups
    monkeypatch.setattr(frame_rewrite, "WHOLE_BYTES", g.input_bytes - 1)
    r = rewrite_file_group(tbl.metadata, tbl.io, g, plan.strategy, parquet_io="arrow-frames", backend="cpu")
    assert r.parquet_io == "pyarrow"
    assert r.parquet_io_reason is not None
    assert r.parquet_io_reason.startswith("arrow: a sort of more than 0 GiB of input once decoded (")
    assert r.parquet_io_reason.endswith("bytes as stored) is done on the host, through spill files")
    with pytest.raises(UnsupportedFeature, match=r"^a sort of more than 0 GiB of input once decoded \("):
        rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")
    mixed = dataclasses.replace(g, spec_id=None)
    r = rewrite_file_group(
        tbl.metadata, tbl.io, mixed, plan.strategy, parquet_io="arrow-frames", backend="cpu"
    )
    assert r.parquet_io_reason is not None and "of more than" in r.parquet_io_reason
    binpack = dataclasses.replace(plan.strategy, kind="binpack", sort_order=None)
    r = rewrite_file_group(tbl.metadata, tbl.io, mixed, binpack, parquet_io="arrow-frames", backend="cpu")
    assert r.parquet_io_reason is not None
    assert r.parquet_io_reason.startswith("arrow: a repartition (files of other specs) of more than 0 GiB")


def _compressible(tmp_path: Path) -> Table:
    """Four files of ten distinct long strings: some 60 KB stored, some 4 MB decoded."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())])
    tbl = sql_catalog(tmp_path).create_table("db.c", schema, properties={"format-version": "2"})
    words = [f"category-{k:02d}-" + "abcdefghij" * 3 for k in range(10)]
    for k in range(4):
        ids = range(k * 20_000, (k + 1) * 20_000)
        tbl.append(pa.table({"id": ids, "s": [words[i // 1000 % 10] for i in ids]}, schema=schema))
    return tbl.refresh()


@pytest.mark.parametrize("what", ["sort", "repartition"])
def test_a_group_held_whole_is_measured_in_decoded_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """A sort (or a repartition) holds the whole group: a group whose stored bytes are well within
    :data:`WHOLE_BYTES` but whose rows decode to more goes to the host path with the reason (the frame path
    held it before: some 150 times its stored bytes in memory)."""
    tbl = _compressible(tmp_path)
    if what == "repartition":
        with tbl.update_spec() as u:
            u.add_field("bucket(4, id)")
        tbl = tbl.refresh()
        plan = tbl.compact(options={"rewrite-all": "true"}, dry_run=True).plan
        label = "a repartition (files of other specs)"
    else:
        plan = tbl.compact("sort", sort_order="id DESC", options={"rewrite-all": "true"}, dry_run=True).plan
        label = "a sort"
    (g,) = plan.groups
    assert (g.spec_id is None) == (what == "repartition")
    decoded = sum(read_file(t.file.path).nbytes for t in g.tasks)
    assert decoded > 20 * g.input_bytes
    monkeypatch.setattr(frame_rewrite, "WHOLE_BYTES", 4 * g.input_bytes)
    assert frame_rewrite.frame_unsupported(g, plan.strategy) is None  # by the stored bytes: it fits
    r = rewrite_file_group(tbl.metadata, tbl.io, g, plan.strategy, parquet_io="arrow-frames", backend="cpu")
    assert r.parquet_io == "pyarrow"
    assert r.parquet_io_reason is not None
    assert r.parquet_io_reason.startswith(f"arrow: {label} of more than 0 GiB of input once decoded (")
    assert "estimated from the files' footers" in r.parquet_io_reason
    with pytest.raises(UnsupportedFeature, match=f"^{re.escape(label)} of more than 0 GiB of input once"):
        rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")
    monkeypatch.setattr(frame_rewrite, "WHOLE_BYTES", 2 * decoded)  # the estimate is no wild guess
    r = rewrite_file_group(tbl.metadata, tbl.io, g, plan.strategy, parquet_io="arrow-frames", backend="cpu")
    assert (r.parquet_io, r.parquet_io_reason) == ("arrow", None)


def test_a_binpack_of_one_spec_is_not_held_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tbl = _compressible(tmp_path)
    plan, (g,) = groups(tbl)
    monkeypatch.setattr(frame_rewrite, "WHOLE_BYTES", 0)
    r = rewrite_file_group(tbl.metadata, tbl.io, g, plan.strategy, parquet_io="arrow-frames", backend="cpu")
    assert (r.parquet_io, r.parquet_io_reason) == ("arrow", None)


def test_a_property_the_library_cannot_follow_sends_the_group_to_the_host_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_engine.execute import frame_scan

    tbl = table_with_deletes(tmp_path, 2)
    plan, (g,) = groups(tbl)
    monkeypatch.setattr(ArrowFrames, "encode_unsupported", lambda self, schema, options: "no zstd here")

    def unread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read through frames although nothing could be written")

    monkeypatch.setattr(frame_scan, "frame_stream", unread)
    r = rewrite_file_group(tbl.metadata, tbl.io, g, plan.strategy, parquet_io="arrow-frames", backend="cpu")
    assert (r.parquet_io, r.parquet_io_reason) == ("pyarrow", "arrow: no zstd here")


def test_which_parquet_io_runs() -> None:
    assert resolve_parquet_io("auto", "cpu") == "pyarrow"
    assert resolve_parquet_io("arrow-frames", "cpu") == "arrow-frames"
    with pytest.raises(
        InvalidOption, match=r"^parquet_io='gpu': expected one of auto, pyarrow, cudf, arrow-frames$"
    ):
        resolve_parquet_io("gpu", "cpu")


def test_compaction_results_say_who_wrote_each_group(tmp_path: Path) -> None:
    tbl = table_with_deletes(tmp_path, 3, partitioned=True)
    before = tbl.scan().to_arrow()
    result = tbl.compact(options={"rewrite-all": "true"}, backend="cpu", parquet_io="arrow-frames")
    assert result.groups and {g.parquet_io for g in result.groups} == {"arrow"}
    assert all(g["parquet_io"] == "arrow" for g in result.to_json()["groups"])
    tbl.refresh()
    assert_rows_equal(tbl.scan().to_arrow(), before)
    with pytest.raises(InvalidOption, match=r"parquet_io='x'"):
        tbl.compact(options={"rewrite-all": "true"}, parquet_io="x")


@pytest.mark.gpu
@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("fraction", [None, 0.3], ids=["one-file", "target-0.3"])
def test_cudf_writes_the_files_the_host_path_writes(
    tmp_path: Path, version: int, fraction: float | None
) -> None:
    if optional("cudf") is None:
        pytest.skip("cuDF is not installed")
    from gpu_engine.backend.cudf_sink import CudfSink

    tbl = table_with_deletes(tmp_path, version, partitioned=True)
    options = {}
    if fraction is not None:
        total = sum(t.file.file_size_in_bytes for t in tbl.scan().plan().tasks)
        options["target-file-size-bytes"] = str(int(total * fraction / 3))
    plan, planned = groups(tbl, **options)
    for g in planned:
        host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
        got = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, CudfSink(), backend="cuda")
        assert files_of(got) == files_of(host), g
        assert got.parquet_io == "cudf"


def test_cudf_asked_for_without_cudf_is_an_error_naming_it(tmp_path: Path) -> None:
    if optional("cudf") is not None:
        pytest.skip("cuDF is installed here")
    tbl = table_with_deletes(tmp_path, 2)
    head = tbl.metadata.current_snapshot_id
    with pytest.raises(BackendUnavailable, match=r"needs the 'cudf' package, which is not installed"):
        tbl.compact(options={"rewrite-all": "true"}, backend="cpu", parquet_io="cudf")
    assert tbl.refresh().metadata.current_snapshot_id == head


@pytest.mark.gpu
@pytest.mark.parametrize(("strategy", "order"), [("sort", "name DESC NULLS LAST, id"), ("zorder", "a, x")])
def test_cudf_orders_as_the_host_path_orders(tmp_path: Path, strategy: str, order: str) -> None:
    if optional("cudf") is None:
        pytest.skip("cuDF is not installed")
    from gpu_engine.backend.cudf_sink import CudfSink

    tbl = table_with_deletes(tmp_path, 3)
    plan = tbl.compact(strategy, sort_order=order, options={"rewrite-all": "true"}, dry_run=True).plan
    (g,) = plan.groups
    host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
    got = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, CudfSink(), backend="cuda")
    assert files_of(got) == files_of(host)


@pytest.mark.parametrize("b_metrics", [None, "none"], ids=["metrics", "b-without-metrics"])
def test_files_that_encode_larger_than_the_input_are_cut_at_the_maximum_size(
    tmp_path: Path, b_metrics: str | None
) -> None:
    """Input stored in id order compresses well; ordered by a bucket of the id it does not: files cut at
    the input's bytes per row came out several times the maximum size. They are cut again by the bytes
    per row written (and later files by those) to the host writer's limit, all rows kept in order. A
    column without metrics (no column size recorded) still counts: its bytes are in the file's size."""
    properties = {"write.metadata.metrics.column.b": b_metrics} if b_metrics else {}
    _, tbl = new_table(tmp_path, 2, properties=properties)
    for k in range(4):
        ids = pa.array(range(k * 20_000, (k + 1) * 20_000), pa.int64())
        tbl.append(pa.table({"id": ids, "b": pc.multiply(ids, 3)}), backend="cpu")
    total = sum(t.file.file_size_in_bytes for t in tbl.scan().plan().tasks)
    options = {"rewrite-all": "true", "target-file-size-bytes": str(total // 2)}
    plan = tbl.compact("sort", sort_order="bucket(1000, id), id", options=options, dry_run=True).plan
    (g,) = plan.groups
    r = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")
    assert len(r.added) > g.expected_output_files
    assert all(f.file_size_in_bytes <= g.max_output_file_size * OVERSHOOT for f in r.added), [
        (f.record_count, f.file_size_in_bytes) for f in r.added
    ]
    assert sum(f.record_count for f in r.added) == r.rows_read == 80_000
    ids = pa.concat_tables([read_file(f.path) for f in r.added]).column("id").to_pylist()
    host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
    assert ids == pa.concat_tables([read_file(f.path) for f in host.added]).column("id").to_pylist()
    kept = {t.file.path for t in tbl.scan().plan().tasks} | {f.path for f in (*r.added, *host.added)}
    on_disk = {str(p) for p in Path(tbl.location.removeprefix("file://"), "data").rglob("*.parquet")}
    assert on_disk == {path.removeprefix("file://") for path in kept}  # the oversized files deleted


@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_files_of_other_specs_are_repartitioned(tmp_path: Path, strategy: str) -> None:
    """A group of files of an older spec: its rows split by the current spec's partitions where the frame
    is, each partition's rows in the host path's order."""
    tbl = table_with_deletes(tmp_path, 2)  # unpartitioned files
    with tbl.update_spec() as u:
        u.add_field("region")
        u.add_field("bucket(2, id)")
    tbl.append(gen_rows(5_000, 50, seed=9), backend="cpu")
    plan = tbl.compact(
        strategy, sort_order="name DESC NULLS LAST, id" if strategy == "sort" else None,
        options={"rewrite-all": "true"}, dry_run=True,
    ).plan  # fmt: skip
    [old] = [g for g in plan.groups if g.spec_id is None]
    host = rewrite_group(tbl.metadata, tbl.io, old, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, old, plan.strategy, ArrowFrames(), backend="cpu")

    def by_partition(r: RewriteResult) -> dict[Any, list[tuple[Any, ...]]]:
        out: dict[Any, list[tuple[Any, ...]]] = {}
        for f in r.added:
            out.setdefault(f.partition, []).extend(
                tuple(_canon(v) for v in row.values()) for row in read_file(f.path).to_pylist()
            )
        return out

    assert by_partition(frames) == by_partition(host)
    assert len(by_partition(frames)) == 6  # three regions x two buckets
    assert all(f.spec_id == old.output_spec_id for f in frames.added)
    assert frames.rows_read == frames.rows_written == host.rows_written


@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_a_small_partition_first_does_not_cut_the_others_into_small_files(
    tmp_path: Path, strategy: str
) -> None:
    """Files of an older spec repartitioned where the first partition met holds one row: the other
    partitions' files are cut as on the host (one file each here), not by the bytes a row of that tiny
    file took (mostly its page headers and statistics: seven files of a partition's 10,000 rows before)."""
    _, tbl = new_table(tmp_path, 2)
    for a in range(10):  # the first row of each file: a partition of its own once the spec has `int`
        rows = gen_rows(a * 2000, 2000, seed=a)
        first = pa.array([1000 + a] + [j % 2 for j in range(1, 2000)], pa.int32())
        tbl.append(rows.set_column(rows.schema.get_field_index("a"), "a", first))
    with tbl.update_spec() as u:
        u.add_field("a")
    sort = "name DESC NULLS LAST, id" if strategy == "sort" else None
    options = {"rewrite-all": "true", "target-file-size-bytes": str(1 << 20)}
    plan = tbl.compact(strategy, sort_order=sort, options=options, dry_run=True).plan
    [old] = [g for g in plan.groups if g.spec_id is None]
    host = rewrite_group(tbl.metadata, tbl.io, old, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, old, plan.strategy, ArrowFrames(), backend="cpu")

    def counts(r: RewriteResult) -> dict[Any, list[int]]:
        out: dict[Any, list[int]] = {}
        for f in r.added:
            out.setdefault(f.partition, []).append(f.record_count)
        return out

    assert counts(frames) == counts(host)
    assert counts(host)[(0,)] == [9990] and counts(host)[(1,)] == [10_000]


@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_many_small_files_repartitioned_make_the_files_the_host_path_makes(
    tmp_path: Path, strategy: str
) -> None:
    """Compaction's main case into a new spec: many files of a few rows each, mostly footers and page
    headers. The host writer rolls files on the bytes it writes: one file; the frame path cut the rows by
    the group's input bytes before writing any (five files of 60 rows)."""
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False)] + [(f"c{i}", pa.string()) for i in range(8)]
    )
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", schema, partition_spec=["bucket(2, id)"], properties={"format-version": "2"}
    )
    for k in range(60):
        ids = list(range(k * 5, k * 5 + 5))
        tbl.append(
            pa.table({"id": ids, **{f"c{i}": [f"v{j * 7 % 101}" for j in ids] for i in range(8)}}, schema)
        )
    with tbl.update_spec() as u:
        u.remove_field("id_bucket")
    sort = "id DESC" if strategy == "sort" else None
    options = {"rewrite-all": "true", "target-file-size-bytes": "50000"}
    plan = tbl.compact(strategy, sort_order=sort, options=options, dry_run=True).plan
    [group] = plan.groups
    assert group.spec_id is None and group.input_bytes > 3 * group.max_output_file_size
    host = rewrite_group(tbl.metadata, tbl.io, group, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, group, plan.strategy, ArrowFrames(), backend="cpu")
    assert [f.record_count for f in frames.added] == [f.record_count for f in host.added] == [300]


def test_bloom_filters_send_the_group_to_the_host_with_the_reason(tmp_path: Path) -> None:
    """The frame writer writes no bloom filters (cuDF's writes none): a table that asks for one has its
    groups written by pyarrow, the reason recorded, and the filter is in the file."""
    tbl = table_with_deletes(tmp_path, 2)
    tbl.update_properties().set("write.parquet.bloom-filter-enabled.column.id", "true").commit()
    result = tbl.compact(options={"rewrite-all": "true"}, backend="cpu", parquet_io="arrow-frames")
    (g,) = result.groups
    assert g.parquet_io == "pyarrow"
    assert g.parquet_io_reason == (
        "arrow: table property write.parquet.bloom-filter-enabled.column.id: the frame writer writes no "
        "bloom filters (cuDF's writes none)"
    )
    (added,) = [e.file for e in snapshot_entries(tbl) if e.file.content == 0]
    assert pq.ParquetFile(added.path).metadata.row_group(0).column(0).to_dict()["bloom_filter_length"]


def test_files_a_little_past_the_maximum_are_cut_as_on_the_host(tmp_path: Path) -> None:
    """A v3 group whose files come out larger than its input (the row-lineage columns the rewrite adds):
    each split still one file of up to 1.25 x the maximum output size, as the host writer rolls (the frame
    path cut each in two at the maximum: twice the files)."""
    _, tbl = new_table(tmp_path, 3)
    tbl.append(gen_rows(0, 5000, seed=129))
    plan, (g,) = groups(tbl, **{"target-file-size-bytes": "16384"})
    host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")
    counts = [f.record_count for f in host.added]
    assert [f.record_count for f in frames.added] == counts and len(counts) == g.expected_output_files
    assert any(f.file_size_in_bytes > g.max_output_file_size for f in frames.added)


def test_row_groups_hold_the_minimum_rows_as_on_the_host(tmp_path: Path) -> None:
    """``write.parquet.row-group-size-bytes=1``: row groups of ``row-group-check-min-record-count`` (100)
    rows, as the host writer (and Java's) make them, so the files are the host path's (one-row groups made
    each file some 70 times larger, then cut again: 137 files of 22 rows instead of 3)."""
    _, tbl = new_table(tmp_path, 2, properties={"write.parquet.row-group-size-bytes": "1"})
    for i in range(3):
        tbl.append(gen_rows(i * 1000, 1000, seed=i))
    total = sum(t.file.file_size_in_bytes for t in tbl.scan().plan().tasks)
    plan, (g,) = groups(tbl, **{"target-file-size-bytes": str(total // 3)})
    host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")

    def layout(r: RewriteResult) -> list[tuple[int, list[int]]]:
        out = []
        for f in r.added:
            md = pq.read_metadata(f.path)
            out.append((f.record_count, [md.row_group(i).num_rows for i in range(md.num_row_groups)]))
        return out

    assert layout(frames) == layout(host) and len(frames.added) == g.expected_output_files
    assert all(min(groups[:-1]) == 100 for _, groups in layout(frames))


def test_a_target_below_a_files_overhead_cuts_files_as_the_host_does(tmp_path: Path) -> None:
    """A target of 2,000 bytes for rows of 17 columns: a file is mostly footer and page headers. The
    frame path cuts files as the host writer rolls them, never below its least rows a row group (100):
    the same files. (Each file was cut again by its bytes per row, footer and page headers counted as row
    bytes, so every piece was still past the limit, and the bytes per input byte they inflated cut the
    later files smaller: 67 files of 9 to 43 rows where the host writes 11.)"""
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False)] + [pa.field(f"c{i}", pa.string()) for i in range(16)]
    )
    tbl = sql_catalog(tmp_path).create_table("db.w", schema, properties={"format-version": "2"})
    for k in range(3):
        columns = {"id": pa.array(range(k * 300, (k + 1) * 300), pa.int64())}
        columns |= {f"c{i}": pa.array([f"v{(j * 7 + i) % 13}" for j in range(300)]) for i in range(16)}
        tbl.append(pa.table(columns, schema=schema))
    plan, (g,) = groups(tbl.refresh(), **{"target-file-size-bytes": "2000"})
    host = rewrite_group(tbl.metadata, tbl.io, g, plan.strategy, backend="cpu")
    frames = rewrite_group_frames(tbl.metadata, tbl.io, g, plan.strategy, ArrowFrames(), backend="cpu")
    counts = [f.record_count for f in frames.added]
    assert counts == [f.record_count for f in host.added] and len(counts) == g.expected_output_files
    assert sum(counts) == 900 and min(counts) > 50
