"""Bad input to a scan: every broken file raises a typed error naming the file at fault, never rows that
are silently wrong, and leaves no file open behind it.

Corrupt tables are copies of small fixture tables (no INVENTORY extra path map needed) in pytest's
``tmp_path``, loaded with ``relocate=True``; the fixtures themselves are never written.
"""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_engine as ge
from gpu_engine.backend import probe_cuda
from gpu_engine.errors import (
    BackendUnavailable,
    DataFileError,
    ExpressionError,
    GpuEngineError,
    InvalidType,
    UnsupportedFeature,
)
from gpu_engine.planning import scan as planning_scan
from gpu_engine.planning.position_scope import UNSCOPED
from gpu_engine.table import Table
from gpu_engine.tasks import ScanTask

from ..planning._support import FIXTURES, load, require_fixtures
from .oracles import assert_same_rows, duckdb_rows

ICE = "impala/iceberg_test/hadoop_catalog/ice"
POSITIONAL = f"{ICE}/iceberg_v2_delete_positional"  # 1 data file (3 rows), 1 position delete file
EQUALITY = f"{ICE}/iceberg_v2_delete_equality"  # 3 data files, 2 equality delete files (1 may match)
NO_DELETES = f"{ICE}/iceberg_v2_no_deletes"
NULL_DELETE = f"{ICE}/iceberg_v2_null_delete_record"
DANGLING = f"{ICE}/iceberg_spark_compaction_with_dangling_delete"
PG_DV = "pg_lake/sample_tables_v3/public/v3_pos_dv"  # 1 data file (50 rows), one DV blob (5 rows)
IMPALA_DV = "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors"  # one Puffin file, two DV blobs
BUCKET = "pg_lake/sample_tables_v3/public/v3_partitioned_bucket"


# -- helpers ---------------------------------------------------------------------------------------------


def _copy(rel: str, tmp_path: Path) -> Path:
    require_fixtures()
    dest = tmp_path / "table"
    shutil.copytree(FIXTURES / rel, dest)
    return dest


def _load(table_dir: Path) -> Table:
    return ge.load_table(table_dir, relocate=True)


def _tasks(table_dir: Path) -> tuple[ScanTask, ...]:
    return _load(table_dir).scan(backend="cpu").plan().tasks


def _open_files_under(root: Path) -> list[str]:
    """Paths under ``root`` this process holds open (Linux /proc)."""
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        return []
    gc.collect()
    prefix = str(root.resolve())
    out = []
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target)
    return out


def _assert_scan_fails(
    table_dir: Path, error: type[Exception], culprit: str | Path, match: str, *, via: str = "arrow"
) -> GpuEngineError:
    """Scanning ``table_dir`` raises ``error`` naming ``culprit``, matching ``match``; no file stays open."""
    scan = _load(table_dir).scan(backend="cpu")
    with pytest.raises(error, match=match) as info:
        if via == "arrow":
            scan.to_arrow()
        else:
            for _ in scan.to_batches():
                pass
    assert isinstance(info.value, GpuEngineError)
    assert str(culprit) in str(info.value), f"the error does not name {culprit}: {info.value}"
    assert not _open_files_under(table_dir), "files left open after the error"
    return info.value


def _only(paths: list[Path]) -> Path:
    assert len(paths) == 1, paths
    return paths[0]


def _data_file(table_dir: Path) -> Path:
    """The (single) data file of a one-file fixture table copy."""
    return _only([Path(t.file.path) for t in _tasks(table_dir)])


def _position_delete_file(table_dir: Path) -> Path:
    return _only(sorted({Path(d.path) for t in _tasks(table_dir) for d in t.deletes if d.kind == "position"}))


def _rewrite_parquet(path: Path, table: pa.Table) -> None:
    """Replace ``path`` with ``table`` written with the schema it carries (field ids included)."""
    path.unlink()
    pq.write_table(table, path)


# -- missing files ---------------------------------------------------------------------------------------


def test_missing_data_file(tmp_path: Path) -> None:
    table_dir = _copy(POSITIONAL, tmp_path)
    data = _data_file(table_dir)
    data.unlink()
    _assert_scan_fails(table_dir, DataFileError, data, "not found")


def test_missing_position_delete_file(tmp_path: Path) -> None:
    table_dir = _copy(POSITIONAL, tmp_path)
    deletes = _position_delete_file(table_dir)
    deletes.unlink()
    _assert_scan_fails(table_dir, DataFileError, deletes, "position delete file not found")


@pytest.mark.parametrize("rel", [PG_DV, IMPALA_DV])
def test_missing_puffin_file(rel: str, tmp_path: Path) -> None:
    table_dir = _copy(rel, tmp_path)
    puffin = _only(sorted({Path(d.path) for t in _tasks(table_dir) for d in t.deletes if d.kind == "dv"}))
    puffin.unlink()
    _assert_scan_fails(table_dir, DataFileError, puffin, "deletion vector file not found")


def test_missing_equality_delete_file(tmp_path: Path) -> None:
    table_dir = _copy(EQUALITY, tmp_path)
    eq_files = sorted({Path(d.path) for t in _tasks(table_dir) for d in t.deletes if d.kind == "equality"})
    # the table has two; the other one's key range misses every data file (planning/equality_pruning.py)
    assert len(eq_files) == 1, eq_files
    eq_files[0].unlink()
    _assert_scan_fails(table_dir, DataFileError, eq_files[0], "not found")


def test_missing_file_while_streaming_batches(tmp_path: Path) -> None:
    table_dir = _copy(EQUALITY, tmp_path)
    data = sorted(Path(t.file.path) for t in _tasks(table_dir))
    data[-1].unlink()
    _assert_scan_fails(table_dir, DataFileError, data[-1], "not found", via="batches")


# -- corrupt data files ----------------------------------------------------------------------------------


def _half(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _ten_bytes(raw: bytes) -> bytes:
    return raw[:10]


def _garbage(raw: bytes) -> bytes:
    return bytes((i * 131 + 7) % 256 for i in range(len(raw)))


def _garbage_between_magic(raw: bytes) -> bytes:
    """Parquet magic at both ends, a footer length pointing inside the file, garbage in between."""
    body = _garbage(raw)[: len(raw) - 12]
    return b"PAR1" + body + (len(body) // 2).to_bytes(4, "little") + b"PAR1"


def _empty(raw: bytes) -> bytes:
    return b""


CORRUPTIONS = {
    "cut-in-half": _half,
    "cut-to-10-bytes": _ten_bytes,
    "garbage": _garbage,
    "garbage-between-magic": _garbage_between_magic,
    "empty": _empty,
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_corrupt_data_file(how: str, tmp_path: Path) -> None:
    table_dir = _copy(POSITIONAL, tmp_path)
    data = _data_file(table_dir)
    data.write_bytes(CORRUPTIONS[how](data.read_bytes()))
    _assert_scan_fails(table_dir, DataFileError, data, "Parquet")


@pytest.mark.parametrize("how", ["cut-in-half", "cut-to-10-bytes", "garbage"])
def test_corrupt_position_delete_file(how: str, tmp_path: Path) -> None:
    table_dir = _copy(POSITIONAL, tmp_path)
    deletes = _position_delete_file(table_dir)
    deletes.write_bytes(CORRUPTIONS[how](deletes.read_bytes()))
    _assert_scan_fails(table_dir, DataFileError, deletes, "Parquet")


@pytest.mark.parametrize("how", ["cut-in-half", "cut-to-10-bytes", "garbage"])
def test_corrupt_equality_delete_file(how: str, tmp_path: Path) -> None:
    table_dir = _copy(EQUALITY, tmp_path)
    eq_file = sorted({Path(d.path) for t in _tasks(table_dir) for d in t.deletes if d.kind == "equality"})[0]
    eq_file.write_bytes(CORRUPTIONS[how](eq_file.read_bytes()))
    _assert_scan_fails(table_dir, DataFileError, eq_file, "Parquet")


@pytest.mark.parametrize("rows", [2, 4], ids=["fewer-rows", "more-rows"])
@pytest.mark.parametrize("rel", [POSITIONAL, NO_DELETES])
def test_data_file_row_count_differs_from_manifest(rel: str, rows: int, tmp_path: Path) -> None:
    table_dir = _copy(rel, tmp_path)
    data = _data_file(table_dir)
    original = pq.read_table(data)
    assert original.num_rows == 3
    replaced = pa.concat_tables([original, original]).slice(0, rows)
    assert replaced.schema.field(0).metadata == original.schema.field(0).metadata  # field ids kept
    _rewrite_parquet(data, replaced)
    _assert_scan_fails(table_dir, DataFileError, data, rf"has {rows} rows but its manifest entry says 3")


# -- deletion vectors ------------------------------------------------------------------------------------


def _dv_blobs(table_dir: Path) -> list[tuple[Path, int, int]]:
    """(Puffin file, content_offset, content_size_in_bytes) of every DV blob, as the manifests record."""
    found = set()
    for task in _tasks(table_dir):
        for d in task.deletes:
            if d.kind == "dv":
                assert d.content_offset is not None and d.content_size_in_bytes is not None
                found.add((Path(d.path), d.content_offset, d.content_size_in_bytes))
    return sorted(found)


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x5A
    path.write_bytes(bytes(raw))


# blob layout: length (4, big-endian) | magic D1 D3 39 64 | bitmap | CRC-32 (4)
DV_CORRUPTIONS: dict[str, tuple[Callable[[int, int], int], str]] = {
    "magic": (lambda offset, size: offset + 5, r"deletion vector magic is [0-9a-f]{8}, not d1d33964"),
    "crc": (lambda offset, size: offset + size - 2, r"CRC-32 mismatch"),
    "bitmap": (lambda offset, size: offset + size - 6, r"CRC-32 mismatch"),
    "length": (lambda offset, size: offset + 3, r"length field says"),
}


@pytest.mark.parametrize("what", sorted(DV_CORRUPTIONS))
@pytest.mark.parametrize("rel", [PG_DV, IMPALA_DV])
def test_corrupt_deletion_vector(rel: str, what: str, tmp_path: Path) -> None:
    table_dir = _copy(rel, tmp_path)
    blobs = _dv_blobs(table_dir)
    puffin, offset, size = blobs[-1]  # the last blob: in the Impala table, not at the file's start
    where, match = DV_CORRUPTIONS[what]
    _flip(puffin, where(offset, size))
    err = _assert_scan_fails(table_dir, DataFileError, puffin, match)
    assert f"offset {offset}" in str(err)


@pytest.mark.parametrize("rel", [PG_DV, IMPALA_DV])
def test_truncated_puffin_file(rel: str, tmp_path: Path) -> None:
    table_dir = _copy(rel, tmp_path)
    puffin, offset, size = _dv_blobs(table_dir)[-1]
    puffin.write_bytes(puffin.read_bytes()[: offset + size // 2])
    _assert_scan_fails(table_dir, DataFileError, puffin, r"truncated")


# -- position deletes that do not fit ------------------------------------------------------------------


@pytest.mark.parametrize("pos", [3, 2**40], ids=["row-count", "huge"])
def test_position_delete_beyond_data_file(pos: int, tmp_path: Path) -> None:
    table_dir = _copy(POSITIONAL, tmp_path)
    data = _data_file(table_dir)
    assert pq.read_metadata(data).num_rows == 3
    deletes = _position_delete_file(table_dir)
    original = pq.read_table(deletes)
    index = original.schema.get_field_index("pos")
    field = original.schema.field(index)
    assert (field.metadata or {}).get(b"PARQUET:field_id") == b"2147483545"
    changed = original.set_column(index, field, pa.array([pos] * original.num_rows, field.type))
    assert changed.num_rows == original.num_rows  # the manifest's record_count still matches
    _rewrite_parquet(deletes, changed)
    err = _assert_scan_fails(table_dir, DataFileError, deletes, rf"deletes position {pos} of .*only 3 rows")
    assert str(data) in str(err)


def test_null_file_path_in_position_delete_file() -> None:
    tbl = load(NULL_DELETE)
    with pytest.raises(DataFileError, match=r"NULL file_path") as info:
        tbl.scan(backend="cpu").to_arrow()
    message = str(info.value)
    culprits = [Path(d.path) for t in tbl.scan().plan().tasks for d in t.deletes]
    assert any(str(p) in message for p in culprits), message
    assert not _open_files_under(FIXTURES / NULL_DELETE)


def test_dangling_position_delete_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A position delete naming a data file that is not in the table (compacted away) deletes nothing.
    Its equal ``file_path`` bounds name that file, so the planner attaches it to no task; read as a
    writer without bounds would have left it (partition-scoped), it reaches the task and is ignored."""
    tbl = load(DANGLING)
    assert not any(t.deletes for t in tbl.scan().plan().tasks)
    expected = duckdb_rows(DANGLING)
    assert_same_rows(tbl.scan(backend="cpu").to_arrow(), expected, context=f"{DANGLING}: ours vs DuckDB")
    monkeypatch.setattr(planning_scan, "path_scopes", lambda table, path_map: [UNSCOPED] * len(table))
    plan = tbl.scan().plan()
    data_files = {t.file.path for t in plan.tasks}
    assert any(t.deletes for t in plan.tasks), "the fixture's dangling delete is no longer planned"
    actual = tbl.scan(backend="cpu").to_arrow()
    assert_same_rows(actual, expected, context=f"{DANGLING} without file_path bounds: ours vs DuckDB")
    dangling = [d for t in plan.tasks for d in t.deletes]
    for d in dangling:
        targets = set(pq.read_table(d.path, columns=["file_path"]).column(0).to_pylist())
        assert not any(str(t).endswith(Path(f).name) for t in targets for f in data_files), targets


# -- bad requests ----------------------------------------------------------------------------------------


def test_unknown_column_is_named() -> None:
    with pytest.raises(InvalidType, match=r"no_such_column"):
        load(BUCKET).scan(columns=["id", "no_such_column"], backend="cpu").to_arrow()


def test_unknown_nested_column_is_named() -> None:
    with pytest.raises(InvalidType, match=r"point\.z"):
        load("pg_lake/sample_tables_v3/public/v3_nested_basic").scan(columns=["point.z"]).to_arrow()


def test_metadata_column_named_twice() -> None:
    with pytest.raises(InvalidType, match=r"twice"):
        load(BUCKET).scan(columns=["_pos", "id", "_pos"], backend="cpu").to_arrow()


def test_filter_on_unknown_column_is_named() -> None:
    with pytest.raises(ExpressionError, match=r"no_such_column"):
        load(BUCKET).scan(filter="no_such_column = 1", backend="cpu").to_arrow()


def test_filter_that_does_not_parse() -> None:
    with pytest.raises(ExpressionError):
        load(BUCKET).scan(filter="id = = 1", backend="cpu").to_arrow()


def test_row_lineage_on_v2_table() -> None:
    for column in ("_row_id", "_last_updated_sequence_number"):
        with pytest.raises(UnsupportedFeature, match=rf"{column}.*format-version 3"):
            load(POSITIONAL).scan(columns=[column], backend="cpu").to_arrow()


def test_bad_backend_and_limit() -> None:
    tbl = load(BUCKET)
    with pytest.raises(UnsupportedFeature, match=r"backend='tpu'"):
        tbl.scan(backend="tpu")
    with pytest.raises(UnsupportedFeature, match=r"limit=-1"):
        tbl.scan(limit=-1)


def test_cuda_backend_without_a_device() -> None:
    probe = probe_cuda()
    if probe.available:
        pytest.skip(f"a CUDA backend is available here: {probe.detail}")
    scan = load(BUCKET).scan(backend="cuda")
    with pytest.raises(BackendUnavailable, match=r"backend='cuda'"):
        scan.to_arrow()
    with pytest.raises(BackendUnavailable, match=r"backend='cuda'"):
        scan.to_batches()
