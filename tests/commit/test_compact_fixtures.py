"""Every real fixture table, copied and compacted with ``rewrite-all``, keeps exactly its rows.

For each Iceberg table of INVENTORY.json (that our engine reads and that has a current snapshot), a
committable copy is made (:mod:`._fixture_copy`: metadata in a temporary file-system table directory, data
read in place from the read-only fixture) and compacted with ``rewrite-all`` and
``remove-dangling-deletes`` on the CPU backend. Then:

1. our scan after the compaction gives the same multiset of rows as before;
2. PyIceberg (``StaticTable`` over the new metadata file) and
3. DuckDB's iceberg extension (``iceberg_scan`` of the new metadata file) give those rows too: the limits
   that keep them from reading the fixture itself (equality deletes, data files without field ids or
   without their identity-partition columns, ...) are gone once every file is rewritten by us;
4. no scan task carries a delete file;
5. each new data file's manifest entry (read with fastavro) has exact metrics: record count, file size,
   value/null/NaN counts and lower/upper bounds of every top-level primitive column as computed here
   from the Parquet file with pyarrow, under the table's metrics modes (``truncate(16)`` by default,
   truncation done here);
6. every snapshot the compaction committed is a ``replace`` and the head's ``total-records`` is the row
   count (and ``total-data-files`` the live data files);

and the fixture's files are unchanged (the tests may run as a user the read-only modes do not stop).
Tables the writer legitimately refuses are in :data:`COMPACT_CANNOT` with the exact error.
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
import uuid
import warnings
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from gpu_engine._deps import optional
from gpu_engine.errors import UnsupportedFeature
from gpu_engine.iceberg import serde
from gpu_engine.iceberg import types as it
from gpu_engine.io.paths import normalize
from gpu_engine.table import Table

from ..execute.oracles import _LOCK, _duckdb, _without_bool8, assert_same_rows
from ..execute.test_fixture_scans import ENGINE_CANNOT
from ..planning._support import FIXTURES, MISSING, SHARED, inventory_paths, load
from ._fixture_copy import committable_copy, tree_state

TABLES = inventory_paths()
OPTIONS = {"rewrite-all": "true", "remove-dangling-deletes": "true"}

_VARIANT = (UnsupportedFeature, r"^column '\w+': writing Iceberg variant columns is not supported$")
# Tables whose compaction is refused, and the error it must give (nothing is written then).
COMPACT_CANNOT: dict[str, tuple[type[Exception], str]] = {
    # the v3 variant type: the Parquet writer does not write variant values (shredded or not)
    "fixtures/impala/iceberg_test/iceberg_v3/trino_variant": _VARIANT,
    "fixtures/impala/iceberg_test/iceberg_v3/trino_nested_variant": _VARIANT,
}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# -- the independent readers -----------------------------------------------------------------------------


def pyiceberg_rows(tbl: Table) -> pa.Table:
    with _quiet():
        result = StaticTable.from_metadata(tbl.metadata_location).scan().to_arrow()
    assert isinstance(result, pa.Table)
    return result


def duckdb_rows(tbl: Table) -> pa.Table:
    """``iceberg_scan`` of the table's metadata file (booleans as plain bool; columns DuckDB renamed for
    case-insensitivity get their Iceberg names back, as oracles.duckdb_rows does)."""
    with _LOCK:
        result = _duckdb().execute("SELECT * FROM iceberg_scan(?)", [tbl.metadata_location]).to_arrow_table()
    assert isinstance(result, pa.Table)
    plain = pa.schema([f.with_type(_without_bool8(f.type)) for f in result.schema])
    if plain != result.schema:
        result = result.cast(plain)
    names = [f.name for f in tbl.schema().fields]
    got = result.column_names
    if got != names and len(got) == len(names):
        assert all(g == n or g.lower().startswith(n.lower() + "_") for g, n in zip(got, names, strict=True))
        result = result.rename_columns(names)
    return result


# -- manifests, read with fastavro -----------------------------------------------------------------------


def _avro(path: str) -> list[dict[str, Any]]:
    with open(normalize(path), "rb") as f:
        return [r for r in fastavro.reader(f) if isinstance(r, dict)]


def added_entries(tbl: Table, snapshot_id: int) -> list[dict[str, Any]]:
    """The data_file records of the data files ``snapshot_id`` added (status ADDED, by that snapshot)."""
    snap = tbl.metadata.snapshot_by_id(snapshot_id)
    if snap.manifest_list is not None:
        manifests = [m["manifest_path"] for m in _avro(snap.manifest_list)]
    else:
        manifests = list(snap.manifests or ())
    out = []
    for m in manifests:
        for entry in _avro(m):
            added_by = entry.get("snapshot_id")
            if entry["status"] == 1 and added_by in (None, snapshot_id):
                data_file = entry["data_file"]
                if data_file.get("content", 0) == 0:
                    out.append(data_file)
    return out


def _pairs(items: list[dict[str, Any]] | None) -> dict[int, Any]:
    return {int(kv["key"]): kv["value"] for kv in items or []}


# -- metrics computed from the Parquet file --------------------------------------------------------------

MAX_CODE_POINT = 0x10FFFF


def truncate_upper_string(value: str, n: int) -> str | None:
    """The least string of at most ``n`` code points greater than every string starting with
    ``value[:n]`` (``value`` itself when it is short enough); None when none exists."""
    if len(value) <= n:
        return value
    chars = list(value[:n])
    while chars:
        cp = ord(chars[-1]) + 1
        if cp == 0xD800:  # surrogates are not scalar values
            cp = 0xE000
        if cp <= MAX_CODE_POINT:
            chars[-1] = chr(cp)
            return "".join(chars)
        chars.pop()
    return None


def truncate_upper_bytes(value: bytes, n: int) -> bytes | None:
    if len(value) <= n:
        return value
    data = bytearray(value[:n])
    while data:
        if data[-1] < 0xFF:
            data[-1] += 1
            return bytes(data)
        data.pop()
    return None


def _mode(props: dict[str, str], name: str) -> tuple[str, int | None]:
    """The metrics mode of top-level column ``name``: (kind, truncate length)."""
    text = props.get(f"write.metadata.metrics.column.{name}")
    text = text or props.get("write.metadata.metrics.default") or "truncate(16)"
    text = text.strip().lower()
    if text.startswith("truncate(") and text.endswith(")"):
        return "truncate", int(text[len("truncate(") : -1])
    assert text in ("none", "counts", "full"), text
    return text, None


def _field_id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(b"PARQUET:field_id")
    return None if raw is None else int(raw)


def _physical(t: it.PrimitiveType, col: pa.ChunkedArray) -> list[Any]:
    """The column's non-null values as Iceberg physical values (the forms serde.from_bytes returns)."""
    name = t.name
    if name == "date":
        col = col.cast(pa.int32())
    elif name == "time":
        col = col.cast(pa.time64("us")).cast(pa.int64())
    elif name in ("timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"):
        assert pa.types.is_timestamp(col.type), col.type
        unit = "ns" if name.endswith("_ns") else "us"
        col = col.cast(pa.timestamp(unit, tz=col.type.tz)).cast(pa.int64())
    elif name == "uuid":
        if isinstance(col.type, pa.BaseExtensionType):
            col = pa.chunked_array([c.storage for c in col.chunks], col.type.storage_type)
        return [uuid.UUID(bytes=v) for v in col.to_pylist() if v is not None]
    return [v for v in col.to_pylist() if v is not None]


def _float_key(v: float) -> tuple[float, bool]:
    return v, math.copysign(1.0, v) > 0  # -0.0 < 0.0


def _same_value(got: Any, want: Any) -> bool:
    if isinstance(want, float):
        return isinstance(got, float) and struct.pack("<d", got) == struct.pack("<d", want)
    if isinstance(want, Decimal):
        return isinstance(got, Decimal) and got == want
    return bool(type(got) is type(want) and got == want)


def assert_exact_metrics(
    tbl: Table, data_file: dict[str, Any], *, context: str, stored_if_no_smaller: bool = False
) -> None:
    """The manifest record ``data_file`` (fastavro) against the Parquet file it names; with
    ``stored_if_no_smaller`` (cuDF's writer) a column chunk may also be stored UNCOMPRESSED, which libcudf
    does where the codec would not make it smaller."""
    path = normalize(data_file["file_path"])
    assert data_file["file_format"].upper() == "PARQUET", context
    assert data_file["file_size_in_bytes"] == os.path.getsize(path), context
    meta = pq.ParquetFile(path).metadata
    table = pq.read_table(path)
    assert data_file["record_count"] == table.num_rows == meta.num_rows, context
    codec = str(tbl.properties.get("write.parquet.compression-codec", "zstd")).upper()
    chunks = [
        meta.row_group(g).column(c) for g in range(meta.num_row_groups) for c in range(meta.num_columns)
    ]
    codecs = {codec, "UNCOMPRESSED"} if stored_if_no_smaller else {codec}
    assert {c.compression for c in chunks} <= codecs, f"{context}: {path}: not {codec}-compressed"
    by_id = {_field_id(f): i for i, f in enumerate(table.schema)}
    sizes: dict[int, int] = {}
    for c in chunks:
        top = c.path_in_schema.split(".")[0]
        fid = _field_id(table.schema.field(top))
        if fid is not None and c.path_in_schema == top:  # top-level primitive columns
            sizes[fid] = sizes.get(fid, 0) + c.total_compressed_size
    column_sizes = _pairs(data_file.get("column_sizes"))
    value_counts = _pairs(data_file.get("value_counts"))
    null_counts = _pairs(data_file.get("null_value_counts"))
    nan_counts = _pairs(data_file.get("nan_value_counts"))
    lower, upper = _pairs(data_file.get("lower_bounds")), _pairs(data_file.get("upper_bounds"))
    props = dict(tbl.properties)
    schema = tbl.schema()
    primitives = sum(1 for _ in _primitive_ids(schema.as_struct))
    assert "write.metadata.metrics.default" in props or primitives <= 100, (
        f"{context}: {primitives} primitive columns: the max-inferred-column-defaults rule is not modelled"
    )
    for fld in schema.fields:
        t = fld.type
        if not isinstance(t, it.PrimitiveType):
            continue
        fid, where = fld.field_id, f"{context}: {path.rsplit('/', 1)[-1]} column {fld.name!r} ({t})"
        assert fid in by_id, f"{where}: no Parquet column with this field id"
        col = table.column(by_id[fid])
        kind, length = _mode(props, fld.name)
        if kind == "none":
            for m in (column_sizes, value_counts, null_counts, nan_counts, lower, upper):
                assert fid not in m, f"{where}: metrics mode none, yet metrics recorded"
            continue
        assert column_sizes.get(fid) == sizes[fid], f"{where}: column size {column_sizes.get(fid)}"
        assert value_counts.get(fid) == table.num_rows, f"{where}: value count {value_counts.get(fid)}"
        assert null_counts.get(fid) == col.null_count, f"{where}: null count {null_counts.get(fid)}"
        values = _physical(t, col)
        if t.name in ("float", "double"):
            nans = sum(1 for v in values if math.isnan(v))
            assert nan_counts.get(fid) == nans, f"{where}: NaN count {nan_counts.get(fid)}, want {nans}"
            values = [v for v in values if not math.isnan(v)]
        else:
            assert fid not in nan_counts, f"{where}: a NaN count for a non-float column"
        if kind == "counts" or not values:
            assert fid not in lower and fid not in upper, f"{where}: bounds recorded, none expected"
            continue
        key: Any = _float_key if t.name in ("float", "double") else None
        lo, hi = min(values, key=key), max(values, key=key)
        if length is not None and t.name == "string":  # truncate(length)
            lo, hi = lo[:length], truncate_upper_string(hi, length)
        elif length is not None and (t.name == "binary" or isinstance(t, it.FixedType)):
            lo, hi = lo[:length], truncate_upper_bytes(hi, length)
        got_lo = serde.from_bytes(t, lower[fid]) if fid in lower else None
        got_hi = serde.from_bytes(t, upper[fid]) if fid in upper else None
        assert _same_value(got_lo, lo), f"{where}: lower bound {got_lo!r}, want {lo!r}"
        if hi is None:
            assert fid not in upper, f"{where}: upper bound {got_hi!r}, want none (cannot be truncated)"
        else:
            assert _same_value(got_hi, hi), f"{where}: upper bound {got_hi!r}, want {hi!r}"


def _primitive_ids(t: it.IcebergType) -> Iterator[int]:
    children: list[tuple[int, it.IcebergType]] = []
    if isinstance(t, it.StructType):
        children = [(f.field_id, f.type) for f in t.fields]
    elif isinstance(t, it.ListType):
        children = [(t.element_id, t.element)]
    elif isinstance(t, it.MapType):
        children = [(t.key_id, t.key), (t.value_id, t.value)]
    for fid, child in children:
        if isinstance(child, it.PrimitiveType):
            yield fid
        else:
            yield from _primitive_ids(child)


# -- the test --------------------------------------------------------------------------------------------


def _with_lineage(tbl: Table) -> pa.Table:
    names = [f.name for f in tbl.schema().fields]
    return tbl.scan(columns=[*names, "_row_id", "_last_updated_sequence_number"]).to_arrow()


def _data_dir_files(tbl: Table) -> set[str]:
    root = Path(tbl.location) / "data"
    return {str(p) for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()


FRAMES = {"arrow-frames": "arrow", "cudf": "cudf"}  # parquet_io -> the frame library's name


def _parquet_io_usable(parquet_io: str) -> None:
    if parquet_io == "cudf" and optional("cudf") is None:
        pytest.skip("cuDF is not installed")


@pytest.mark.parametrize(
    "parquet_io", ["pyarrow", "arrow-frames", pytest.param("cudf", marks=pytest.mark.gpu)]
)
@pytest.mark.parametrize("rel", TABLES)
def test_rewrite_all_keeps_every_row(rel: str, parquet_io: str, tmp_path: Path) -> None:
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    if rel in ENGINE_CANNOT:
        pytest.skip(f"engine refuses this table: {ENGINE_CANNOT[rel][1]}")
    _parquet_io_usable(parquet_io)
    fixture_state = tree_state(SHARED / rel)
    tbl = committable_copy(rel, tmp_path / "table")
    md = tbl.metadata
    if md.current_snapshot_id is None:
        pytest.skip("no current snapshot: nothing to compact")
    before = tbl.scan().to_arrow()
    # the copy holds the rows the fixture holds (test_fixture_scans checks those against other readers)
    assert_same_rows(before, load(rel).scan().to_arrow(), context=f"{rel}: the copy vs the fixture")

    if rel in COMPACT_CANNOT:
        error, match = COMPACT_CANNOT[rel]
        with pytest.raises(error, match=match):
            tbl.compact(options=OPTIONS, backend="cpu", parquet_io=parquet_io)
        tbl.refresh()
        assert tbl.metadata.current_snapshot_id == md.current_snapshot_id
        assert not _data_dir_files(tbl), "a refused compaction left files behind"
        assert tree_state(SHARED / rel) == fixture_state
        return

    lineage_before = _with_lineage(tbl) if md.format_version >= 3 else None
    result = tbl.compact(options=OPTIONS, backend="cpu", parquet_io=parquet_io)
    tbl.refresh()
    assert not result.failures, result.failures
    for g in result.groups:  # the frame path took every group it takes (pyarrow stood in for the others)
        took = g.parquet_io_reason is None
        assert g.parquet_io == (FRAMES[parquet_io] if parquet_io in FRAMES and took else "pyarrow"), g
        assert took or str(g.parquet_io_reason).startswith(f"{FRAMES.get(parquet_io)}: "), g
    assert result.commits, "a rewrite-all compaction committed nothing"

    # (1)-(3) the same rows, by every reader
    assert_same_rows(tbl.scan().to_arrow(), before, context=f"{rel}: ours after compaction vs before")
    assert_same_rows(pyiceberg_rows(tbl), before, context=f"{rel}: PyIceberg after compaction vs before")
    assert_same_rows(duckdb_rows(tbl), before, context=f"{rel}: DuckDB after compaction vs before")
    if lineage_before is not None:  # v3: each row keeps its row id and last-updated sequence number
        assert_same_rows(_with_lineage(tbl), lineage_before, context=f"{rel}: row lineage")

    # (4) no delete applies any more: the compaction removed the deletes of every file it replaced
    # (position delete files without referenced_data_file too, once all their live data files are replaced)
    tasks = tbl.scan().plan().tasks
    left = {d.path: d for t in tasks for d in t.deletes}
    assert not left, f"{rel}: deletes still applying: {sorted(left)}"

    # (5) every data file is new, and each new file has exact metrics
    rewrite = result.commits[0].snapshot_id
    added = added_entries(tbl, rewrite)
    live = {normalize(t.file.path) for t in tasks}
    assert {normalize(a["file_path"]) for a in added} == live
    assert live == _data_dir_files(tbl), "data files written but not committed, or committed elsewhere"
    if md.format_version >= 2:  # the new files keep the sequence number the compaction started from
        seqs = {t.file.data_sequence_number for t in tasks}
        assert seqs <= {result.plan.starting_sequence_number}, seqs
    for data_file in added:
        assert_exact_metrics(tbl, data_file, context=rel, stored_if_no_smaller=parquet_io == "cudf")

    # (6) replace snapshots; the head's totals
    head = tbl.metadata.current_snapshot()
    assert head is not None and head.snapshot_id == result.commits[-1].snapshot_id
    for commit in result.commits:
        summary = tbl.metadata.snapshot_by_id(commit.snapshot_id).summary or {}
        assert summary.get("operation") == "replace", summary
    want = {
        "total-records": before.num_rows,
        "total-data-files": len(live),
        "total-delete-files": len(left),
        "total-position-deletes": sum(d.record_count for d in left.values()),
        "total-equality-deletes": 0,
    }  # not total-files-size: the copy's position-delete files (respelled) differ in size from the originals
    # a total the starting snapshot does not record cannot be known incrementally and is left out
    started = md.current_snapshot()
    recorded = set((started.summary if started is not None else None) or {})
    totals = dict(head.summary or {})
    for key, value in want.items():
        assert totals.get(key) == (str(value) if key in recorded else None), (key, totals)

    assert tree_state(SHARED / rel) == fixture_state, "the compaction changed the fixture's files"
