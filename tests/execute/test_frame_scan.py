"""Scans decoded into frames (the path of ``to_cudf``) return exactly what ``to_arrow`` returns.

The frame path is run here with :class:`ArrowFrames`, its host twin (pyarrow decodes the columns the
frame decoder would): every real fixture table and every snapshot of the generated delete tables, with
filters, limits, metadata columns and schema evolution, on each backend. Files the frame decoder cannot
read as the host reader does are decoded on the host with the reason recorded, or refused. With cuDF
installed (a GPU machine), ``to_cudf`` is compared with ``cudf.DataFrame.from_arrow(to_arrow())``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_engine as ge
from gpu_engine._deps import optional
from gpu_engine.backend.cudf_frames import cudf_unsupported
from gpu_engine.errors import DataFileError, InvalidType, UnsupportedFeature
from gpu_engine.execute import frame_scan, frame_task
from gpu_engine.execute.frames import ArrowFrames
from gpu_engine.scan import TableScan

from ..commit._support import CATALOG_NAME, sql_catalog
from ..planning._support import MISSING, inventory_paths, load
from .gen_table import GeneratedDeletesTable
from .test_fixture_scans import ENGINE_CANNOT
from .test_generated_scans import tables  # noqa: F401  (module fixture)

TABLES = [t for t in inventory_paths() if t not in ENGINE_CANNOT]


def _same(scan: TableScan, frames: ArrowFrames | None = None) -> pa.Table:
    """The scan through the frame twin, checked equal (values, types, order) to ``to_arrow``."""
    expected = scan.to_arrow()
    got = scan.to_frame(frames or ArrowFrames())
    assert got.schema == expected.schema
    assert got.num_rows == expected.num_rows
    if not got.equals(expected):  # NaN differs from itself there: compare values with NaN as NaN
        assert _nan_as_text(got.to_pylist()) == _nan_as_text(expected.to_pylist())
    return got


def _nan_as_text(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_as_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_as_text(v) for v in value]
    return value


@pytest.mark.parametrize("rel", TABLES)
def test_fixture_tables(rel: str) -> None:
    if rel == MISSING:
        pytest.fail("fixtures not found")
    scan = load(rel).scan()
    _same(scan)
    run = scan.last_run
    assert run is not None
    for path, reason in run.host_decoded:
        assert path in reason and "field id" in reason


def test_fixture_files_are_decoded_by_the_frame_decoder() -> None:
    """Most fixture files have only plain primitive columns: the frame decoder, not the host, reads them."""
    device = host = 0
    for rel in TABLES:
        if rel == MISSING:
            pytest.fail("fixtures not found")
        scan = load(rel).scan()
        scan.to_frame(ArrowFrames())
        run = scan.last_run
        assert run is not None
        host += len(run.host_decoded)
        device += len(run.plan.tasks) - len(run.host_decoded)
    assert device > 2 * host > 0, (device, host)


@pytest.mark.parametrize("kind", ["position", "dv", "equality", "upserts", "mixed"])
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
def test_generated_delete_tables_at_every_snapshot(
    tables: dict[tuple[str, bool], GeneratedDeletesTable],  # noqa: F811
    kind: str,
    partitioned: bool,
    backend: str,
) -> None:
    generated = tables[kind, partitioned]
    tbl = ge.load_table(Path(generated.metadata_location))
    for snapshot_id in generated.snapshots:
        scan = tbl.scan(snapshot_id=snapshot_id, backend=backend)
        _same(scan)
        run = scan.last_run
        assert run is not None and run.host_decoded == [] and run.backend.name == backend
    names = generated.expected.column_names
    for where in (f"{names[0]} in (1, 7, 600)", f"{names[0]} < 100 or {names[0]} > 900"):
        _same(tbl.scan(filter=where, backend=backend))
        _same(tbl.scan(filter=where, backend=backend, columns=[names[-1]]))
    for limit in (0, 1, 157):
        got = _same(tbl.scan(backend=backend, limit=limit))
        assert got.num_rows == min(limit, tbl.scan().to_arrow().num_rows)
    _same(tbl.scan(backend=backend, columns=["_file", "_pos", names[0], "_spec_id", "_partition"]))
    _same(tbl.scan(backend=backend, columns=[]))


def _evolved(tmp_path: Path) -> ge.Table:
    """A v3 table written before and after promotions, a rename, a drop and added columns with defaults."""
    schema = pa.schema([
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("price", pa.decimal128(7, 2)),
        pa.field("f", pa.float32()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("day", pa.date32()),
        pa.field("gone", pa.int64()),
    ])  # fmt: skip
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", schema, partition_spec=["identity(day)"], properties={"format-version": "3"}
    )
    rows = {
        "id": [1, 2, 3],
        "name": ["a", None, "c"],
        "price": [Decimal("1.25"), None, Decimal("-3.50")],
        "f": [1.5, None, -0.25],
        "ts": [datetime(2024, 1, 1, 1), None, datetime(1969, 12, 31, 23, 59)],
        "day": [datetime(2024, 1, 1).date()] * 3,
        "gone": [7, 8, 9],
    }
    tbl.append(pa.table(rows, schema=schema))
    with tbl.update_schema() as update:
        update.update_column("id", "long")
        update.update_column("price", "decimal(12, 2)")
        update.update_column("f", "double")
        update.rename_column("name", "label")
        update.delete_column("gone")
        update.add_column("added", "string", default="dflt")
        update.add_column("plain", "int")
    tbl = tbl.refresh()
    tbl.append(
        pa.table(
            {
                "id": pa.array([4], pa.int64()),
                "label": ["d"],
                "price": pa.array([Decimal("123456.78")], pa.decimal128(12, 2)),
                "f": pa.array([2.0], pa.float64()),
                "ts": pa.array([datetime(2030, 5, 6)], pa.timestamp("us")),
                "day": [datetime(2024, 1, 2).date()],
                "added": ["new"],
                "plain": pa.array([5], pa.int32()),
            }
        )
    )
    tbl.delete("id = 2")
    return tbl.refresh()


def test_schema_evolution_defaults_and_partition_constants(tmp_path: Path, backend: str) -> None:
    tbl = _evolved(tmp_path)
    scan = tbl.scan(backend=backend)
    got = _same(scan).sort_by("id")
    assert got.column("added").to_pylist() == ["dflt", "dflt", "new"]
    assert got.column("id").to_pylist() == [1, 3, 4]
    assert got.column("label").to_pylist() == ["a", "c", "d"]
    run = scan.last_run
    assert run is not None and run.host_decoded == []
    _same(tbl.scan(backend=backend, columns=["day", "plain", "_row_id", "_last_updated_sequence_number"]))
    _same(tbl.scan(backend=backend, filter="added = 'dflt' and price < 0"))
    _same(tbl.scan(backend=backend, filter="day = '2024-01-02'"))


def _nested(tmp_path: Path) -> ge.Table:
    schema = pa.schema([
        pa.field("id", pa.int64()),
        pa.field("s", pa.struct([pa.field("a", pa.int32())])),
    ])  # fmt: skip
    tbl = sql_catalog(tmp_path).create_table("db.n", schema)
    tbl.append(pa.table({"id": [1, 2], "s": [{"a": 1}, None]}, schema=schema))
    return tbl.refresh()


def test_files_the_frame_decoder_cannot_read_are_decoded_on_the_host_with_the_reason(tmp_path: Path) -> None:
    tbl = _nested(tmp_path)
    scan = tbl.scan()
    _same(scan)
    run = scan.last_run
    assert run is not None
    [(path, reason)] = run.host_decoded
    assert path == run.plan.tasks[0].file.path
    assert reason.startswith(f"{path}: column 's' (field id 2): ")
    assert "not decoded on the device" in reason
    only_flat = tbl.scan(columns=["id"])
    _same(only_flat)
    assert only_flat.last_run is not None and only_flat.last_run.host_decoded == []


class _Counting(ArrowFrames):
    """Records each decoder call's sources."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def read(self, io: Any, sources: Any, columns: Any) -> pa.Table:
        self.calls.append([path for path, _ in sources])
        return super().read(io, sources, columns)


def test_files_of_the_same_stored_columns_are_decoded_in_one_call(
    tables: dict[tuple[str, bool], GeneratedDeletesTable],  # noqa: F811
    tmp_path: Path,
) -> None:
    generated = tables["position", False]
    scan = ge.load_table(Path(generated.metadata_location)).scan()
    frames = _Counting()
    _same(scan, frames)
    paths = [t.file.path for t in scan.plan().tasks]
    assert len(paths) > 3 and frames.calls == [paths]
    evolved = _evolved(tmp_path)  # the second file stores id as long, price as decimal(12, 2): its own call
    frames = _Counting()
    _same(evolved.scan(), frames)
    assert sorted(len(c) for c in frames.calls) == [1, 1]


def test_decoder_calls_are_cut_by_the_bytes_their_rows_decode_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of a few long strings store in a few kilobytes and decode to megabytes: a decoder call takes
    files up to :data:`BATCH_BYTES` of decoded rows (estimated from their footers), not of stored bytes
    (all four files in one call before, whatever they decode to)."""
    from gpu_engine.execute import frame_scan

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema)
    words = [f"category-{k:02d}-" + "abcdefghij" * 3 for k in range(10)]
    for k in range(4):
        ids = range(k * 20_000, (k + 1) * 20_000)
        tbl.append(pa.table({"id": ids, "s": [words[i // 1000 % 10] for i in ids]}, schema=schema))
    tbl = tbl.refresh()
    tasks = tbl.scan().plan().tasks
    one = max(pq.read_table(t.file.path.removeprefix("file://")).nbytes for t in tasks)
    monkeypatch.setattr(frame_scan, "BATCH_BYTES", int(2.5 * one))  # two files' decoded rows a call
    assert sum(t.length for t in tasks) * 10 < frame_scan.BATCH_BYTES  # their stored bytes: all in one
    frames = _Counting()
    _same(tbl.scan(), frames)
    assert [len(c) for c in frames.calls] == [2, 2]


def test_files_are_decoded_together_only_where_their_parquet_schemas_agree(tmp_path: Path) -> None:
    """cuDF reads several files in one call only where every schema element agrees (nullability aside),
    columns not read included."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema)
    tbl.append(pa.table({"id": [1, 2], "v": [3, 4]}, schema=schema))
    tbl.append(pa.table({"id": [5], "v": [6]}, schema=schema))
    with tbl.update_schema() as update:
        update.make_optional("id")
    tbl = tbl.refresh()
    tbl.append(pa.table({"id": pa.array([None, 7], pa.int64()), "v": [8, 9]}))
    frames = _Counting()
    _same(tbl.scan(), frames)
    assert [len(c) for c in frames.calls] == [3]  # only nullability differs
    with tbl.update_schema() as update:
        update.add_column("w", "string")
    tbl = tbl.refresh()
    tbl.append(pa.table({"id": pa.array([10], pa.int64()), "v": [11], "w": ["x"]}))
    frames = _Counting()
    _same(tbl.scan(columns=["id"]), frames)  # the new file holds a column the others lack, even unread
    assert sorted(len(c) for c in frames.calls) == [1, 3]


def test_the_split_tasks_of_one_file_are_read_as_one_source(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    props = {
        "write.parquet.row-group-size-bytes": "800",
        "write.parquet.row-group-check-min-record-count": "10",
        "read.split.target-size": "1000",
    }
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties=props)
    tbl.append(pa.table({"id": range(300), "s": [str(i) for i in range(300)]}, schema=schema))
    tbl = tbl.refresh()
    scan = tbl.scan(columns=["s", "_pos"])
    assert len(scan.plan().tasks) > 1
    frames = _Counting()
    _same(scan, frames)
    assert frames.calls == [[scan.plan().tasks[0].file.path]]


def test_a_file_whose_row_groups_are_all_pruned_gives_no_rows(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    props = {
        "write.parquet.row-group-size-bytes": "800",
        "write.parquet.row-group-check-min-record-count": "10",
    }
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties=props)
    tbl.append(pa.table({"id": range(300), "s": [str(i) for i in range(300)]}, schema=schema))
    tbl = tbl.refresh()
    [task] = tbl.scan().plan().tasks
    assert pq.ParquetFile(task.file.path.removeprefix("file://")).metadata.num_row_groups > 2
    gap = next(i for i in range(1, 300) if _first_of_a_row_group(task.file.path, i))
    for columns in (None, ["s"], []):  # the file's bounds keep it, every row group's statistics prune it
        assert _same(tbl.scan(filter=f"id > {gap - 1} and id < {gap}", columns=columns)).num_rows == 0


@pytest.mark.parametrize("version", [2, 3], ids=["position-deletes", "dvs"])
def test_deleted_positions_map_to_the_rows_of_the_row_groups_kept(
    tmp_path: Path, version: int, backend: str
) -> None:
    """The batch's position mask is built from each file's row groups left after pruning (a gap where
    one is pruned) and split tasks: the rows and their ``_pos`` equal the host reader's."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    props = {
        "format-version": str(version),
        "write.delete.mode": "merge-on-read",
        "write.parquet.row-group-size-bytes": "800",
        "write.parquet.row-group-check-min-record-count": "10",
        "read.split.target-size": "1500",
    }
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties=props)
    for first in (0, 1000):
        ids = range(first, first + 300)
        tbl.append(pa.table({"id": ids, "s": [str(i) for i in ids]}, schema=schema))
    tbl = tbl.refresh()
    deleted = [i for i in range(1300) if i % 7 == 3 or i % 11 == 0]
    tbl.delete(f"id in ({', '.join(map(str, deleted))})")
    tbl = tbl.refresh()
    path = tbl.scan().plan().tasks[0].file.path
    gap = [i for i in range(1, 300) if _first_of_a_row_group(path, i)][:2]
    assert len(gap) == 2  # a row group [gap[0], gap[1]) lies between others
    columns = ["id", "_pos", "_file"]
    pruned = f"id < {gap[0]} or id >= {gap[1]}"  # the middle row group of each file pruned by its stats
    for where in ("true", pruned, f"{pruned} and s > '5'"):  # the last filters rows of kept groups too
        got = _same(tbl.scan(filter=where, backend=backend, columns=columns))
        assert got.num_rows and not set(deleted) & set(got["id"].to_pylist())
    assert len(tbl.scan().plan().tasks) > 2  # the files split


def _first_of_a_row_group(path: str, i: int) -> bool:
    md = pq.ParquetFile(path.removeprefix("file://")).metadata
    starts, at = [], 0
    for g in range(md.num_row_groups):
        starts.append(at)
        at += md.row_group(g).num_rows
    return i in starts


def test_a_limit_stops_decoding_once_enough_rows_are_held(
    tables: dict[tuple[str, bool], GeneratedDeletesTable],  # noqa: F811
) -> None:
    generated = tables["position", False]
    tbl = ge.load_table(Path(generated.metadata_location))
    frames = _Counting()
    got = tbl.scan(limit=10).to_frame(frames)
    tasks = tbl.scan().plan().tasks
    assert got.num_rows == 10 and len(frames.calls) == 1 and len(frames.calls[0]) < len(tasks) / 2
    _same(tbl.scan(limit=10))


class _NoRowsWithoutColumns(ArrowFrames):
    """Like cuDF: a frame without columns holds no rows (its from_arrow of such a table has none)."""

    def __init__(self) -> None:
        self.assembled = 0

    def assemble(self, columns: Any, schema: pa.Schema, num_rows: int) -> pa.Table:
        self.assembled += 1
        return super().assemble(columns, schema, num_rows if columns else 0)


def test_a_limit_counts_the_rows_decoded_even_where_frames_hold_none(
    tables: dict[tuple[str, bool], GeneratedDeletesTable],  # noqa: F811
) -> None:
    tbl = ge.load_table(Path(tables["position", False].metadata_location))
    assert len(tbl.scan().plan().tasks) > 3
    frames = _NoRowsWithoutColumns()
    tbl.scan(columns=[], limit=5).to_frame(frames)
    assert frames.assembled == 1  # decoding stopped once 5 rows were held


class _NoStrings(ArrowFrames):
    def unsupported(self, schema: pa.Schema) -> str | None:
        return next((f"column {f.name!r} is a string" for f in schema if f.type == pa.large_string()), None)


def test_columns_the_frame_library_cannot_hold_are_refused_before_reading(tmp_path: Path) -> None:
    tbl = _evolved(tmp_path)
    with pytest.raises(UnsupportedFeature, match=r"^arrow: column 'label' is a string$"):
        tbl.scan().to_frame(_NoStrings())
    _same(tbl.scan(columns=["id", "price"]))
    assert tbl.scan(columns=["id", "price"]).to_frame(_NoStrings()).num_rows == 3


def test_host_decode_false_refuses_such_files(tmp_path: Path) -> None:
    tbl = _nested(tmp_path)
    path = tbl.scan().plan().tasks[0].file.path
    with pytest.raises(UnsupportedFeature, match=rf"^{path}: column 's' .*arrow cannot decode it"):
        tbl.scan().to_frame(ArrowFrames(), host_decode=False)
    with pytest.raises(InvalidType, match="host_decode"):
        tbl.scan().to_frame(ArrowFrames(), host_decode="no")  # type: ignore[arg-type]


@pytest.mark.gpu
@pytest.mark.parametrize("rel", TABLES)
def test_to_cudf_equals_cudf_from_arrow(rel: str) -> None:
    cudf = optional("cudf")
    if cudf is None:
        pytest.skip("cuDF is not installed")
    scan = load(rel).scan(backend="cuda")
    rows = scan.to_arrow()
    why = cudf_unsupported(rows.schema)
    if why is not None:  # cuDF itself cannot hold it (the list of types is checked here against cuDF)
        with pytest.raises(ValueError, match="Unsupported type_id"):
            cudf.DataFrame.from_arrow(rows)
        with pytest.raises(UnsupportedFeature, match=rf"^cudf: {re.escape(why)}$"):
            scan.to_cudf()
        return
    got = scan.to_cudf()
    expected = cudf.DataFrame.from_arrow(rows)
    assert list(got.columns) == list(expected.columns)
    assert list(got.dtypes) == list(expected.dtypes)
    assert got.to_arrow().equals(expected.to_arrow())


@pytest.mark.gpu
def test_to_cudf_on_evolved_and_deleted_rows(tmp_path: Path) -> None:
    cudf = optional("cudf")
    if cudf is None:
        pytest.skip("cuDF is not installed")
    tbl = _evolved(tmp_path)
    for scan in (
        tbl.scan(backend="cuda"),
        tbl.scan(backend="cuda", filter="added = 'dflt' and price < 0"),
        tbl.scan(backend="cuda", columns=["_file", "_pos", "_row_id", "id"], limit=2),
    ):
        got = scan.to_cudf(host_decode=False)
        expected = cudf.DataFrame.from_arrow(scan.to_arrow())
        assert list(got.dtypes) == list(expected.dtypes)
        assert got.to_arrow().equals(expected.to_arrow())


@pytest.mark.parametrize("workers", [1, 4])
def test_tasks_prepared_on_any_number_of_threads_give_the_same_rows(
    tables: dict[tuple[str, bool], GeneratedDeletesTable],  # noqa: F811
    workers: int,
) -> None:
    for kind in ("mixed", "upserts"):
        tbl = ge.load_table(Path(tables[kind, True].metadata_location))
        for limit in (None, 5, 300):
            _same(dataclasses.replace(tbl.scan(limit=limit), workers=workers))


# -- found by a differential hunt against to_arrow ----------------------------------------------------------


def _two_files(tmp_path: Path) -> ge.Table:
    cat = sql_catalog(tmp_path)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])
    tbl = cat.create_table("db.t", schema=schema, properties={"write.parquet.compression-codec": "none"})
    # "bbbbbbbb" is no bound of its page: a byte of it changed is a change of the values only
    tbl.append(pa.table({"id": [1, 2, 3], "s": ["aaaaaaaa", "bbbbbbbb", "cccccccc"]}, schema=schema))
    tbl.append(pa.table({"id": [4, 5, 6], "s": ["dddddddd", "eeeeeeee", "ffffffff"]}, schema=schema))
    return tbl


def test_local_files_are_prepared_on_the_calling_thread_and_remote_ones_ahead_on_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Preparing a local file is Python holding the GIL (threads only contend for it); a remote file's
    reads wait on the network, so its tasks are prepared ahead on worker threads."""
    schema = pa.schema([pa.field("id", pa.int64())])
    props = {"write.delete.mode": "merge-on-read"}
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties=props)
    for first in range(0, 40, 10):
        tbl.append(pa.table({"id": range(first, first + 10)}, schema=schema))
    tbl = tbl.refresh()
    tbl.delete("id in (3, 17, 25)")
    tbl = tbl.refresh()
    caller, on = threading.current_thread(), list[bool]()
    real = frame_task.prepare

    def spy(task: Any, ctx: Any) -> Any:
        on.append(threading.current_thread() is caller)
        return real(task, ctx)

    monkeypatch.setattr(frame_scan, "prepare", spy)
    monkeypatch.setattr(frame_scan, "default_workers", lambda: 3)
    assert _same(tbl.scan()).num_rows == 37
    assert on == [True] * 4
    on.clear()
    monkeypatch.setattr(frame_scan, "on_local_disk", lambda io, path: False)  # as if they were remote
    assert _same(tbl.scan()).num_rows == 37
    assert len(on) == 4 and not any(on)
    on.clear()
    _same(dataclasses.replace(tbl.scan(), workers=1))  # the caller's choice stands
    assert on == [True] * 4


def test_a_limit_met_before_a_missing_file_is_no_error(tmp_path: Path) -> None:
    tbl = _two_files(tmp_path)
    paths = [t.file.path for t in tbl.scan().plan().tasks]
    Path(paths[-1].removeprefix("file://")).unlink()  # the file of the last task
    for limit in (1, 2):
        got = _same(tbl.scan(limit=limit))
        assert got.num_rows == limit
    with pytest.raises(DataFileError, match="not found"):
        tbl.scan().to_frame(ArrowFrames())


def test_a_page_failing_its_checksum_is_refused_as_by_the_host_reader(tmp_path: Path) -> None:
    tbl = _two_files(tmp_path)
    files = [Path(t.file.path.removeprefix("file://")) for t in tbl.scan().plan().tasks]
    [path] = [f for f in files if b"bbbbbbbb" in f.read_bytes()]  # stored plainly, uncompressed
    data = bytearray(path.read_bytes())
    data[data.index(b"bbbbbbbb")] = ord("X")  # the page still decodes; its CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(DataFileError, match="CRC"):
        tbl.scan().to_arrow()
    with pytest.raises(DataFileError, match="CRC"):
        tbl.scan().to_frame(ArrowFrames())


def test_files_whose_stored_arrow_types_differ_are_decoded_together(tmp_path: Path) -> None:
    """This engine stores large_string in its files' Arrow schema, PyIceberg string: one Parquet layout."""
    from pyiceberg.catalog.sql import SqlCatalog

    tbl = _two_files(tmp_path)
    pt = SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{tmp_path / 'catalog.db'}").load_table("db.t")
    pt.append(pa.table({"id": [7], "s": ["g"]}, schema=pa.schema([("id", pa.int64()), ("s", pa.string())])))
    tbl = tbl.refresh()
    frames = _Counting()
    got = tbl.scan().to_frame(frames)
    assert sorted(got.column("id").to_pylist()) == [1, 2, 3, 4, 5, 6, 7]
    assert len(frames.calls) == 1  # one decoder call for the three files
    _same(tbl.scan())
