"""Manifest list writer (v1-v3): sequence number and first_row_id assignment read back by our reader and by
PyIceberg 0.12, the Avro schema's field ids as fastavro parses them, key-value metadata, rejected input,
v3 row ids inherited without gaps or overlaps, and whole tables assembled from our manifests read by DuckDB's
iceberg extension and PyIceberg."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import duckdb
import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list as pyi_read_manifest_list
from pyiceberg.table import StaticTable

from gpu_engine.errors import ManifestError
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import EQUALITY_DELETES, POSITION_DELETES, ContentFile
from gpu_engine.iceberg.deletion_vectors import encode_dv
from gpu_engine.iceberg.manifest_list import FieldSummary, ManifestFile, read_manifest_list
from gpu_engine.iceberg.manifest_write import (
    UNASSIGNED_SEQ,
    ManifestEntry,
    WrittenManifestList,
    write_manifest,
    write_manifest_list,
)
from gpu_engine.iceberg.manifests import ADDED, DELETED, EXISTING, read_manifest
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec, spec_to_json
from gpu_engine.iceberg.puffin import Blob, parse_footer, write_puffin
from gpu_engine.iceberg.schema import Schema, schema_to_json
from gpu_engine.io.fileio import LocalFileIO

IO = LocalFileIO()
SNAPSHOT, PARENT, SEQ, FIRST = 900, 800, 7, 1000


def _mf(path: str, **kw: Any) -> ManifestFile:
    base: dict[str, Any] = {
        "manifest_path": path,
        "manifest_length": 4242,
        "partition_spec_id": 1,
        "added_snapshot_id": SNAPSHOT,
        "sequence_number": UNASSIGNED_SEQ,
        "min_sequence_number": UNASSIGNED_SEQ,
        "added_files_count": 2,
        "existing_files_count": 1,
        "deleted_files_count": 1,
        "added_rows_count": 20,
        "existing_rows_count": 5,
        "deleted_rows_count": 3,
        "partitions": (FieldSummary(True, False, b"a", b"z"),),
    }
    return ManifestFile(**(base | kw))


def manifests(v: int) -> list[ManifestFile]:
    """New and carried-over manifests, data and deletes, with and without numbers to assign."""
    new_data = _mf("/m/new-data.avro")
    old_data = _mf(
        "/m/old-data.avro",
        added_snapshot_id=5,
        sequence_number=3,
        min_sequence_number=2,
        first_row_id=40 if v == 3 else None,
        key_metadata=b"\x01\x02",
    )
    new_deletes = _mf("/m/new-deletes.avro", content=1, min_sequence_number=4, partitions=None)
    upgraded = _mf(
        "/m/v2-era.avro",
        added_snapshot_id=6,
        sequence_number=2,
        min_sequence_number=2,
        added_rows_count=7,
        existing_rows_count=0,
    )
    no_snapshot = _mf("/m/no-snapshot.avro", added_snapshot_id=None, partitions=(), added_rows_count=0)
    if v == 1:
        return [
            replace(m, sequence_number=0, min_sequence_number=0) for m in (new_data, old_data, no_snapshot)
        ]
    return [new_data, old_data, new_deletes, upgraded, no_snapshot]


def expected(v: int, ms: list[ManifestFile]) -> tuple[list[ManifestFile], int | None]:
    """The rows as the spec says they must be listed, computed apart from the writer."""
    out, next_id = [], FIRST
    for m in ms:
        m = replace(m, added_snapshot_id=SNAPSHOT if m.added_snapshot_id is None else m.added_snapshot_id)
        if v >= 2:
            m = replace(
                m,
                sequence_number=SEQ if m.sequence_number == UNASSIGNED_SEQ else m.sequence_number,
                min_sequence_number=SEQ if m.min_sequence_number == UNASSIGNED_SEQ else m.min_sequence_number,
            )
        if v == 3 and m.content == 0 and m.first_row_id is None:
            m = replace(m, first_row_id=next_id)
            next_id += (m.added_rows_count or 0) + (m.existing_rows_count or 0)
        out.append(m)
    return out, (next_id if v == 3 else None)


def write(tmp_path: Path, v: int, ms: list[ManifestFile]) -> WrittenManifestList:
    return write_manifest_list(
        IO,
        str(tmp_path / "snap.avro"),
        format_version=v,
        snapshot_id=SNAPSHOT,
        parent_snapshot_id=PARENT if v != 2 else None,
        sequence_number=SEQ if v >= 2 else None,
        manifests=ms,
        first_row_id=FIRST if v == 3 else None,
    )


@pytest.mark.parametrize("v", [1, 2, 3])
def test_assignment_read_back(tmp_path: Path, v: int) -> None:
    ms = manifests(v)
    want, next_id = expected(v, ms)
    written = write(tmp_path, v, ms)
    assert written.manifests == tuple(want)
    assert written.length == (tmp_path / "snap.avro").stat().st_size
    assert written.next_row_id == next_id
    assert written.added_rows == (None if next_id is None else next_id - FIRST)
    if v == 3:  # new-data 25 rows, v2-era 7, no-snapshot 5; old-data keeps 40, deletes get none
        assert [m.first_row_id for m in want] == [1000, 40, None, 1025, 1032] and next_id == 1037
    assert read_manifest_list(written.path) == tuple(want)


@pytest.mark.parametrize("v", [1, 2, 3])
def test_pyiceberg_reads_the_list(tmp_path: Path, v: int) -> None:
    want, _ = expected(v, manifests(v))
    written = write(tmp_path, v, manifests(v))
    got = list(pyi_read_manifest_list(PyArrowFileIO().new_input(written.path)))
    assert len(got) == len(want)
    for p, m in zip(got, want, strict=True):
        assert (p.manifest_path, p.manifest_length, p.partition_spec_id, int(p.content)) == (
            m.manifest_path,
            m.manifest_length,
            m.partition_spec_id,
            m.content,
        )
        assert (p.sequence_number, p.min_sequence_number, p.added_snapshot_id) == (
            m.sequence_number if v >= 2 else 0,
            m.min_sequence_number if v >= 2 else 0,
            m.added_snapshot_id,
        )
        counts = (
            "added_files_count",
            "existing_files_count",
            "deleted_files_count",
            "added_rows_count",
            "existing_rows_count",
            "deleted_rows_count",
            "key_metadata",
        )
        assert [getattr(p, c) for c in counts] == [getattr(m, c) for c in counts]
        summaries = (
            None
            if p.partitions is None
            else [
                FieldSummary(s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound)
                for s in p.partitions
            ]
        )
        assert summaries == (None if m.partitions is None else list(m.partitions))


# transcribed from the spec's "Manifest Lists" table: field id -> (name, required) per version
_V1 = {
    500: ("manifest_path", True),
    501: ("manifest_length", True),
    502: ("partition_spec_id", True),
    503: ("added_snapshot_id", True),
    504: ("added_files_count", False),
    505: ("existing_files_count", False),
    506: ("deleted_files_count", False),
    512: ("added_rows_count", False),
    513: ("existing_rows_count", False),
    514: ("deleted_rows_count", False),
    507: ("partitions", False),
    519: ("key_metadata", False),
}
_V2 = {
    **{fid: (n, fid not in (507, 519)) for fid, (n, _) in _V1.items()},
    517: ("content", True),
    515: ("sequence_number", True),
    516: ("min_sequence_number", True),
}
LIST_FIELDS = {1: _V1, 2: _V2, 3: {**_V2, 520: ("first_row_id", False)}}
TYPES = {
    500: "string",
    501: "long",
    502: "int",
    503: "long",
    504: "int",
    505: "int",
    506: "int",
    512: "long",
    513: "long",
    514: "long",
    519: "bytes",
    517: "int",
    515: "long",
    516: "long",
    520: "long",
}


def _fields(record: dict[str, Any]) -> dict[int, tuple[str, bool, Any]]:
    out = {}
    for f in record["fields"]:
        t, optional = f["type"], isinstance(f["type"], list)
        if optional:
            assert t[0] == "null" and len(t) == 2 and f["default"] is None
            t = t[1]
        out[f["field-id"]] = (f["name"], not optional, t)
    return out


@pytest.mark.parametrize("v", [1, 2, 3])
def test_schema_and_metadata(tmp_path: Path, v: int) -> None:
    written = write(tmp_path, v, manifests(v))
    with open(written.path, "rb") as f:
        reader = fastavro.reader(f)
        schema, meta, codec = cast(dict[str, Any], reader.writer_schema), reader.metadata, reader.codec
    assert codec == "deflate" and schema["name"] == "manifest_file"
    fields = _fields(schema)
    assert {fid: (n, r) for fid, (n, r, _) in fields.items()} == LIST_FIELDS[v]
    for fid, (_, _, t) in fields.items():
        if fid == 507:
            assert (t["type"], t["element-id"]) == ("array", 508)
            summary = _fields(t["items"])
            assert summary == {
                509: ("contains_null", True, "boolean"),
                518: ("contains_nan", False, "boolean"),
                510: ("lower_bound", False, "bytes"),
                511: ("upper_bound", False, "bytes"),
            }
        else:
            assert t == TYPES[fid], fid
    want = {
        "snapshot-id": str(SNAPSHOT),
        "parent-snapshot-id": "null" if v == 2 else str(PARENT),
        "format-version": str(v),
    }
    if v >= 2:
        want["sequence-number"] = str(SEQ)
    if v == 3:
        want["first-row-id"] = str(FIRST)
    assert {k: val for k, val in meta.items() if not k.startswith("avro.")} == want


BAD = [
    (1, [_mf("/d.avro", content=1)], "content 1 cannot be listed in format version 1"),
    (2, [_mf("/d.avro", added_rows_count=None)], "requires the file and row counts"),
    (2, [_mf("/d.avro", manifest_length=None)], "manifest_length and partition_spec_id are required"),
    (2, [_mf("/d.avro", first_row_id=3)], "format version 2 has no first_row_id"),
    (3, [_mf("/d.avro", content=1, first_row_id=3)], "delete manifests have no first_row_id"),
    (3, [_mf("/d.avro", existing_rows_count=None)], "requires the file and row counts"),
]


@pytest.mark.parametrize(("v", "ms", "match"), BAD, ids=[b[2] for b in BAD])
def test_rejects(tmp_path: Path, v: int, ms: list[ManifestFile], match: str) -> None:
    with pytest.raises(ManifestError, match=match):
        write(tmp_path, v, ms)
    assert not (tmp_path / "snap.avro").exists()


def test_rejects_missing_snapshot_numbers(tmp_path: Path) -> None:
    path = str(tmp_path / "l.avro")
    common: dict[str, Any] = {"snapshot_id": 1, "parent_snapshot_id": None, "manifests": []}
    with pytest.raises(ManifestError, match="sequence number"):
        write_manifest_list(IO, path, format_version=2, sequence_number=None, **common)
    with pytest.raises(ManifestError, match="needs the snapshot's first_row_id"):
        write_manifest_list(IO, path, format_version=3, sequence_number=1, **common)
    with pytest.raises(ManifestError, match="has no first_row_id"):
        write_manifest_list(IO, path, format_version=2, sequence_number=1, first_row_id=0, **common)
    with pytest.raises(ManifestError, match="format version 0"):
        write_manifest_list(IO, path, format_version=0, sequence_number=1, **common)
    written = write_manifest_list(IO, path, format_version=3, sequence_number=1, first_row_id=12, **common)
    assert (written.manifests, written.added_rows, written.next_row_id) == ((), 0, 12)
    with pytest.raises(FileExistsError):
        write_manifest_list(IO, path, format_version=3, sequence_number=1, first_row_id=12, **common)


# -- v3 row lineage through manifests -----------------------------------------------------------------------

SCHEMA = Schema(
    (it.NestedField(1, "id", it.LONG, required=True), it.NestedField(2, "name", it.STRING)), schema_id=0
)
SPEC = PartitionSpec(0, (PartitionField((2,), 1000, "name", "identity"),))


def test_v3_row_ids_contiguous_across_manifests(tmp_path: Path) -> None:
    def data(i: int, rows: int) -> ContentFile:
        return ContentFile(f"/d/{i}.parquet", "PARQUET", 0, (f"p{i % 2}",), rows, 100)

    first = [
        ManifestEntry.added(data(0, 4)),
        ManifestEntry(EXISTING, 3, 1, 1, data(1, 6)),
        ManifestEntry(DELETED, 3, 1, 1, data(2, 100)),
        ManifestEntry.added(data(3, 2)),
    ]
    second = [
        ManifestEntry.added(data(4, 9)),
        ManifestEntry(EXISTING, 3, 1, 1, replace(data(5, 8), first_row_id=7)),
    ]
    ms = [
        write_manifest(
            IO,
            str(tmp_path / f"m{i}.avro"),
            format_version=3,
            spec=SPEC,
            schema=SCHEMA,
            content="data",
            snapshot_id=SNAPSHOT,
            entries=es,
        )
        for i, es in enumerate((first, second))
    ]
    written = write_manifest_list(
        IO,
        str(tmp_path / "l.avro"),
        format_version=3,
        snapshot_id=SNAPSHOT,
        parent_snapshot_id=None,
        sequence_number=4,
        manifests=ms,
        first_row_id=50,
    )
    # m0: 4 + 2 added, 6 existing -> 12 ids from 50; m1 from 62: 9 added + 8 existing (one already assigned)
    assert [m.first_row_id for m in written.manifests] == [50, 62] and written.next_row_id == 79
    ranges = []
    for m in read_manifest_list(written.path):
        t = read_manifest(m)
        for row in t.select(["status", "first_row_id", "record_count", "sequence_number"]).to_pylist():
            if row["status"] == DELETED:
                assert row["first_row_id"] is None
            else:
                ranges.append((row["first_row_id"], row["first_row_id"] + row["record_count"]))
            assert row["sequence_number"] == (4 if row["status"] == ADDED else 1)
    assert sorted(ranges) == [(7, 15), (50, 54), (54, 60), (60, 62), (62, 71)]


# -- whole tables: DuckDB's iceberg extension and PyIceberg read what we assemble -------------------------


def _duckdb() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        config={
            "allow_unsigned_extensions": "true",
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
        }
    )
    site = Path(duckdb.__file__).resolve().parent.parent
    for ext in ("avro", "iceberg"):
        con.execute(
            f"LOAD '{site}/duckdb_extension_{ext}/extensions/v{duckdb.__version__}/{ext}.duckdb_extension'"
        )
    return con


def _parquet(path: Path, columns: dict[str, tuple[int, pa.Array]]) -> int:
    fields = [
        pa.field(n, a.type, nullable=False, metadata={"PARQUET:field_id": str(fid)})
        for n, (fid, a) in columns.items()
    ]
    pq.write_table(pa.Table.from_arrays([a for _, a in columns.values()], schema=pa.schema(fields)), path)
    return path.stat().st_size


def build_table(root: Path, v: int, with_eq: bool) -> tuple[Path, list[int]]:
    """Snapshot 1 appends two data files (partitions a, b); snapshot 2 deletes id 2 by position (v2 position
    delete file, v3 deletion vector) and, ``with_eq``, id 7 by equality. Returns the metadata file and ids."""
    (root / "data").mkdir(parents=True)
    files = []
    for name, ids in (("a", [1, 2, 3, 4, 5]), ("b", [6, 7, 8, 9, 10])):
        p = root / "data" / f"{name}.parquet"
        size = _parquet(p, {"id": (1, pa.array(ids, pa.int64())), "name": (2, pa.array([name] * 5))})
        files.append(ContentFile(str(p), "PARQUET", 0, (name,), 5, size))
    m1 = write_manifest(
        IO,
        str(root / "m1.avro"),
        format_version=v,
        spec=SPEC,
        schema=SCHEMA,
        content="data",
        snapshot_id=1,
        entries=[ManifestEntry.added(f) for f in files],
    )
    l1 = write_manifest_list(
        IO,
        str(root / "snap-1.avro"),
        format_version=v,
        snapshot_id=1,
        parent_snapshot_id=None,
        sequence_number=1,
        manifests=[m1],
        first_row_id=0 if v == 3 else None,
    )
    deletes = []
    if v == 2:
        p = root / "data" / "pos.parquet"
        size = _parquet(
            p,
            {
                "file_path": (2147483546, pa.array([files[0].path])),
                "pos": (2147483545, pa.array([1], pa.int64())),
            },
        )
        deletes.append(
            ContentFile(
                str(p),
                "PARQUET",
                0,
                ("a",),
                1,
                size,
                content=POSITION_DELETES,
                referenced_data_file=files[0].path,
            )
        )
    else:
        p = root / "data" / "dv.puffin"
        blob = Blob(
            "deletion-vector-v1",
            encode_dv([1]),
            fields=(2147483545,),
            snapshot_id=2,
            sequence_number=2,
            properties={"referenced-data-file": files[0].path, "cardinality": "1"},
        )
        p.write_bytes(write_puffin([blob]))
        (meta,) = parse_footer(p.read_bytes(), source=str(p)).blobs
        deletes.append(
            ContentFile(
                str(p),
                "PUFFIN",
                0,
                ("a",),
                1,
                p.stat().st_size,
                content=POSITION_DELETES,
                referenced_data_file=files[0].path,
                content_offset=meta.offset,
                content_size_in_bytes=meta.length,
            )
        )
    if with_eq:
        p = root / "data" / "eq.parquet"
        size = _parquet(p, {"id": (1, pa.array([7], pa.int64()))})
        deletes.append(
            ContentFile(str(p), "PARQUET", 0, ("b",), 1, size, content=EQUALITY_DELETES, equality_ids=(1,))
        )
    m2 = write_manifest(
        IO,
        str(root / "m2.avro"),
        format_version=v,
        spec=SPEC,
        schema=SCHEMA,
        content="deletes",
        snapshot_id=2,
        entries=[ManifestEntry.added(f) for f in deletes],
    )
    l2 = write_manifest_list(
        IO,
        str(root / "snap-2.avro"),
        format_version=v,
        snapshot_id=2,
        parent_snapshot_id=1,
        sequence_number=2,
        manifests=[*l1.manifests, m2],
        first_row_id=l1.next_row_id,
    )
    assert l1.manifests[0].sequence_number == 1 and l2.manifests[1].sequence_number == 2
    snapshots = []
    for sid, (lst, parent) in enumerate(((l1, None), (l2, 1)), start=1):
        snap: dict[str, Any] = {
            "snapshot-id": sid,
            "sequence-number": sid,
            "timestamp-ms": 1_700_000_000_000 + sid,
            "manifest-list": lst.path,
            "summary": {"operation": "append" if sid == 1 else "delete"},
            "schema-id": 0,
        }
        if parent is not None:
            snap["parent-snapshot-id"] = parent
        if v == 3:
            snap |= {"first-row-id": 0 if sid == 1 else l1.next_row_id, "added-rows": lst.added_rows}
        snapshots.append(snap)
    md: dict[str, Any] = {
        "format-version": v,
        "table-uuid": str(uuid.uuid4()),
        "location": str(root),
        "last-sequence-number": 2,
        "last-updated-ms": 1_700_000_000_002,
        "last-column-id": 2,
        "current-schema-id": 0,
        "schemas": [schema_to_json(SCHEMA)],
        "default-spec-id": 0,
        "partition-specs": [spec_to_json(SPEC)],
        "last-partition-id": 1000,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
        "current-snapshot-id": 2,
        "snapshots": snapshots,
        "snapshot-log": [],
        "metadata-log": [],
        "refs": {"main": {"snapshot-id": 2, "type": "branch"}},
    }
    if v == 3:
        md["next-row-id"] = l2.next_row_id
    path = root / "metadata" / "v1.metadata.json"
    path.parent.mkdir()
    path.write_text(json.dumps(md))
    return path, [i for i in range(1, 11) if i != 2 and not (with_eq and i == 7)]


TABLES = [pytest.param(v, eq, id=f"v{v}-{'eq' if eq else 'pos'}") for v in (2, 3) for eq in (False, True)]


@pytest.mark.parametrize(("v", "with_eq"), TABLES)
def test_duckdb_reads_assembled_table(tmp_path: Path, v: int, with_eq: bool) -> None:
    metadata, ids = build_table(tmp_path, v, with_eq)
    con = _duckdb()
    try:
        got = sorted(r[0] for r in con.execute(f"SELECT id FROM iceberg_scan('{metadata}')").fetchall())
        entries = con.execute(
            f"SELECT manifest_sequence_number, manifest_content, status, content, file_path, record_count "
            f"FROM iceberg_metadata('{metadata}')"
        ).fetchall()
    finally:
        con.close()
    assert got == ids
    by_path = {Path(e[4]).name: e for e in entries}
    assert {n: (e[0], e[2], e[5]) for n, e in by_path.items() if n.endswith(".parquet") and n[0] in "ab"} == {
        "a.parquet": (1, "ADDED", 5),
        "b.parquet": (1, "ADDED", 5),
    }
    deletes = {n: e[0] for n, e in by_path.items() if n not in ("a.parquet", "b.parquet")}
    assert deletes == {("pos.parquet" if v == 2 else "dv.puffin"): 2} | ({"eq.parquet": 2} if with_eq else {})


@pytest.mark.parametrize("v", [2, 3])
def test_pyiceberg_scans_assembled_table(tmp_path: Path, v: int) -> None:
    metadata, ids = build_table(tmp_path, v, with_eq=False)  # PyIceberg 0.12 raises on equality deletes
    table = StaticTable.from_metadata(str(metadata))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == ids
    snapshot = table.current_snapshot()
    assert snapshot is not None
    ours = [
        read_manifest(m).column("sequence_number").to_pylist()
        for m in read_manifest_list(snapshot.manifest_list)
    ]
    assert ours == [[1, 1], [2]]
