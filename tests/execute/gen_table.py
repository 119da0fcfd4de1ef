"""Real Iceberg tables with merge-on-read deletes, and the rows that must survive them.

The generator is independent of gpu_engine (it writes the tables our engine is checked on): data and delete
files are written with pyarrow, Puffin deletion vectors with pyroaring and struct, manifests and manifest
lists with fastavro from the spec's Avro schemas (``_entry_schema`` / ``_list_schema``: the field ids and
layout of PyIceberg's data-manifest writer schema, plus the v3 fields and ``referenced_data_file``), because
PyIceberg 0.12 writes neither delete manifests nor v3 manifests. ``expected`` is computed from what was
deleted by a small, vectorised implementation of the spec's scope rules (``_surviving``), never by reading
the table back.

Table ``db.t`` (SQL catalog on SQLite in ``root``): ``id long`` (required), ``ts timestamp``, ``value double``
(NaN, -0.0, 0.0, nulls), ``name string`` (nulls, empty string, non-ASCII), ``category string`` (nulls,
non-ASCII); unpartitioned or partitioned by ``day(ts)``. The first snapshot appends ``files`` Parquet files
(field ids in ``PARQUET:field_id``; every file holds rows of one day, three consecutive files per day, ids
``0..rows-1`` shuffled within their file; ``row_group_rows`` rows per row group when set); then each delete
commit is its own snapshot (sequence numbers 1, 2, ...):

- ``position`` (v2): S2 Parquet position delete files, each covering up to three data files (one partition);
  S3 one delete file per data file (``referenced_data_file`` set) whose positions partly overlap S2's, one
  data file fully deleted (when ``files >= 5``), and a new data file with a delete file for it committed
  together (equal sequence numbers: the deletes apply).
- ``dv`` (v3): S2 one Puffin file of ``deletion-vector-v1`` blobs; S3 a second Puffin file: new DVs, merged
  DVs (old | new) for data files that had one, the old entries marked DELETED in a rewritten delete
  manifest, a fully deleted file (a run container), and a new data file with its DV in the same commit.
- ``equality`` (v2): S2 equality deletes on ``id`` (decoy keys that match nothing; partitioned: decoys in a
  wrong partition) and on ``name`` with a NULL key (deletes rows whose name is null); S3 appends rows that
  re-use deleted ids and null names (they survive: data seq >= delete seq); S4 deletes some re-used ids
  again (those rows now go).
- ``upserts`` (v2): Flink's upsert mode, ``rounds`` commits (S2, S3, ...) each deleting a random
  ``delete_fraction`` of the ids by equality and writing new rows for half of them in the same commit
  (equal sequence numbers: the new rows stay; the other half stay deleted, as CDC deletes), so each round's
  data files are deleted from by every later round and data files carry different sets of equality
  delete files.
- ``mixed`` (v2): S2 position deletes; S3 ``id`` + NULL ``name`` equality deletes; S4 two-column equality
  deletes on ``(category, id)`` (NULL categories, decoys with a wrong or NULL category); S5 appends rows
  re-using deleted keys plus a position delete file for the new file in the same commit.

Deleted fractions are approximate (``delete_fraction`` of the initial rows by position / id keys, plus the
fully deleted file, plus the ~1% of rows whose name is null for the equality kinds). Paths in metadata are
``file://`` URIs, exactly as PyIceberg's table location spells them; ``metadata_location`` is a plain path.
``expected_at`` filters the rows of an older snapshot on first access (``expected`` is built eagerly), so a
10M-row table generates in about 10-20 s on two cores.

v2 snapshots are committed through PyIceberg's catalog (``AddSnapshotUpdate`` + ``SetSnapshotRefUpdate``), so
PyIceberg writes the metadata JSON. PyIceberg 0.12 cannot write v3 metadata (``NotImplementedError: Writing
V3 is not yet supported``), so for v3 this module writes every metadata JSON itself (row lineage:
snapshot ``first-row-id`` / ``added-rows``, table ``next-row-id``, manifest ``first_row_id``) and registers
the last one in the catalog (``register_table``) once all snapshots are written.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

Kind = Literal["position", "dv", "equality", "upserts", "mixed"]

NAMESPACE = "db"
TABLE = "t"
IDENTIFIER = f"{NAMESPACE}.{TABLE}"
CATALOG_NAME = "gen"
ID, TS, VALUE, NAME, CATEGORY = 1, 2, 3, 4, 5
COLUMNS = ("id", "ts", "value", "name", "category")
FILE_PATH_ID, POS_ID, ROW_POSITION_ID = 2147483546, 2147483545, 2147483645
PARTITION_FIELD_ID = 1000
FIRST_DAY = (dt.date(2024, 1, 1) - dt.date(1970, 1, 1)).days
MICROS_PER_DAY = 86_400_000_000
MANIFEST_ENTRIES = 40  # data files per data manifest
DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
PUFFIN_MAGIC = b"PFA1"
CATEGORIES = pa.array(["books", "café", "electronics", "garden", "toys", "音楽"])
NAMES = pa.array(
    [f"user-{i:03d}" for i in range(150)]
    + ["", "Zoë", "José", "Ærøskøbing", "名前", "Ωmega", "naïve", "straße", "🙂 smile", "Ünïcødé"]
)


def _field(name: str, fid: int, typ: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, typ, nullable=nullable, metadata={b"PARQUET:field_id": str(fid).encode()})


DATA_SCHEMA = pa.schema(
    [
        _field("id", ID, pa.int64(), nullable=False),
        _field("ts", TS, pa.timestamp("us")),
        _field("value", VALUE, pa.float64()),
        _field("name", NAME, pa.string()),
        _field("category", CATEGORY, pa.string()),
    ]
)
POS_SCHEMA = pa.schema(
    [_field("file_path", FILE_PATH_ID, pa.string(), False), _field("pos", POS_ID, pa.int64(), False)]
)
ICEBERG_TYPES = {ID: "long", TS: "timestamp", VALUE: "double", NAME: "string", CATEGORY: "string"}


@dataclass(frozen=True)
class GeneratedDeletesTable:
    metadata_location: str  # absolute path of the current metadata JSON
    catalog_uri: str
    warehouse: str
    catalog_name: str  # the SQL catalog's rows are keyed by catalog name (PyIceberg / JDBC layout)
    identifier: str
    format_version: int
    kind: str
    partitioned: bool
    expected: pa.Table  # rows surviving all deletes at the current snapshot, columns COLUMNS
    snapshots: tuple[int, ...]  # in commit order; the last is current
    expected_at: Mapping[int, pa.Table] = field(repr=False)  # by snapshot id; built on first access
    generate_s: float = 0.0


@dataclass(eq=False)
class _File:
    """A data or delete file as the manifests track it; ``record`` is its ``data_file`` Avro record."""

    path: str
    content: int  # 0 data, 1 position deletes (files and DVs), 2 equality deletes
    day: int | None  # partition value (days since epoch), None when unpartitioned
    record: dict[str, Any]
    table: pa.Table | None = None  # data rows (content 0) or equality delete keys (content 2)
    positions: dict[str, np.ndarray] = field(default_factory=dict)  # data path -> deleted positions
    eq_ids: tuple[int, ...] = ()
    is_dv: bool = False
    seq: int = 0
    snapshot_id: int = 0


@dataclass(eq=False)
class _Manifest:
    content: int
    entries: list[tuple[int, _File]]  # (status, file)
    snapshot_id: int
    seq: int
    path: str = ""
    length: int = 0
    first_row_id: int | None = None


# -- Avro schemas (spec "Manifests" / "Manifest Lists"; layout of PyIceberg's writer schema) ----------------


def _opt(name: str, fid: int, typ: Any) -> dict[str, Any]:
    return {"name": name, "field-id": fid, "type": ["null", typ], "default": None}


def _map(name: str, fid: int, kid: int, vid: int, vtype: str) -> dict[str, Any]:
    kv = {
        "type": "record",
        "name": f"k{kid}_v{vid}",
        "fields": [
            {"name": "key", "type": "int", "field-id": kid},
            {"name": "value", "type": vtype, "field-id": vid},
        ],
    }
    return _opt(name, fid, {"type": "array", "logicalType": "map", "items": kv})


def _entry_schema(format_version: int, partitioned: bool) -> dict[str, Any]:
    part_fields = (
        [_opt("ts_day", PARTITION_FIELD_ID, {"type": "int", "logicalType": "date"})] if partitioned else []
    )
    data_file: list[dict[str, Any]] = [
        {"name": "content", "field-id": 134, "type": "int"},
        {"name": "file_path", "field-id": 100, "type": "string"},
        {"name": "file_format", "field-id": 101, "type": "string"},
        {
            "name": "partition",
            "field-id": 102,
            "type": {"type": "record", "name": "r102", "fields": part_fields},
        },
        {"name": "record_count", "field-id": 103, "type": "long"},
        {"name": "file_size_in_bytes", "field-id": 104, "type": "long"},
        _map("column_sizes", 108, 117, 118, "long"),
        _map("value_counts", 109, 119, 120, "long"),
        _map("null_value_counts", 110, 121, 122, "long"),
        _map("nan_value_counts", 137, 138, 139, "long"),
        _map("lower_bounds", 125, 126, 127, "bytes"),
        _map("upper_bounds", 128, 129, 130, "bytes"),
        _opt("key_metadata", 131, "bytes"),
        _opt("split_offsets", 132, {"type": "array", "element-id": 133, "items": "long"}),
        _opt("equality_ids", 135, {"type": "array", "element-id": 136, "items": "int"}),
        _opt("sort_order_id", 140, "int"),
    ]
    if format_version >= 3:
        data_file.append(_opt("first_row_id", 142, "long"))
    data_file.append(_opt("referenced_data_file", 143, "string"))
    if format_version >= 3:
        data_file += [_opt("content_offset", 144, "long"), _opt("content_size_in_bytes", 145, "long")]
    return {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "field-id": 0, "type": "int"},
            _opt("snapshot_id", 1, "long"),
            _opt("sequence_number", 3, "long"),
            _opt("file_sequence_number", 4, "long"),
            {
                "name": "data_file",
                "field-id": 2,
                "type": {"type": "record", "name": "r2", "fields": data_file},
            },
        ],
    }


def _list_schema(format_version: int) -> dict[str, Any]:
    summary = {
        "type": "record",
        "name": "r508",
        "fields": [
            {"name": "contains_null", "field-id": 509, "type": "boolean"},
            _opt("contains_nan", 518, "boolean"),
            _opt("lower_bound", 510, "bytes"),
            _opt("upper_bound", 511, "bytes"),
        ],
    }
    fields: list[dict[str, Any]] = [
        {"name": "manifest_path", "field-id": 500, "type": "string"},
        {"name": "manifest_length", "field-id": 501, "type": "long"},
        {"name": "partition_spec_id", "field-id": 502, "type": "int"},
        {"name": "content", "field-id": 517, "type": "int"},
        {"name": "sequence_number", "field-id": 515, "type": "long"},
        {"name": "min_sequence_number", "field-id": 516, "type": "long"},
        {"name": "added_snapshot_id", "field-id": 503, "type": "long"},
        {"name": "added_files_count", "field-id": 504, "type": "int"},
        {"name": "existing_files_count", "field-id": 505, "type": "int"},
        {"name": "deleted_files_count", "field-id": 506, "type": "int"},
        {"name": "added_rows_count", "field-id": 512, "type": "long"},
        {"name": "existing_rows_count", "field-id": 513, "type": "long"},
        {"name": "deleted_rows_count", "field-id": 514, "type": "long"},
        _opt("partitions", 507, {"type": "array", "element-id": 508, "items": summary}),
        _opt("key_metadata", 519, "bytes"),
    ]
    if format_version >= 3:
        fields.append(_opt("first_row_id", 520, "long"))
    return {"type": "record", "name": "manifest_file", "fields": fields}


def _schema_json() -> dict[str, Any]:
    return {
        "type": "struct",
        "schema-id": 0,
        "identifier-field-ids": [],
        "fields": [
            {"id": fid, "name": name, "required": fid == ID, "type": ICEBERG_TYPES[fid]}
            for fid, name in zip((ID, TS, VALUE, NAME, CATEGORY), COLUMNS, strict=True)
        ],
    }


def _spec_fields(partitioned: bool) -> list[dict[str, Any]]:
    if not partitioned:
        return []
    return [{"name": "ts_day", "transform": "day", "source-id": TS, "field-id": PARTITION_FIELD_ID}]


# -- file writers and metrics (spec Appendix D single-value serialisation) -----------------------------------


def _kv(mapping: dict[int, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": v} for k, v in sorted(mapping.items())]


def _bound(fid: int, value: Any) -> bytes:
    if fid in (ID, TS, POS_ID):
        return struct.pack("<q", int(value))
    if fid == VALUE:
        return struct.pack("<d", float(value))
    return str(value).encode("utf-8")


def _column_bounds(fid: int, col: pa.ChunkedArray) -> tuple[Any, Any] | None:
    """Lower / upper bound of the non-null (non-NaN) values, -0.0 ordered before +0.0; None when none."""
    if fid == VALUE:
        arr = col.to_numpy(zero_copy_only=False).astype(np.float64)
        arr = arr[~np.isnan(arr)]  # nulls read as NaN too
        if arr.size == 0:
            return None
        lo, hi = float(arr.min()), float(arr.max())
        zeros = arr[arr == 0.0]
        if lo == 0.0:
            lo = -0.0 if np.signbit(zeros).any() else 0.0
        if hi == 0.0:
            hi = 0.0 if (~np.signbit(zeros)).any() else -0.0
        return lo, hi
    if col.null_count == len(col):
        return None
    if fid == TS:
        col = col.cast(pa.int64())
    mm = pc.min_max(col)
    return mm["min"].as_py(), mm["max"].as_py()


def _metrics(table: pa.Table, ids: Sequence[int]) -> dict[str, Any]:
    values, nulls, lower, upper, nans = {}, {}, {}, {}, {}
    for fid, col in zip(ids, table.columns, strict=True):
        values[fid] = len(col)
        nulls[fid] = col.null_count
        if fid == VALUE:
            nans[fid] = int(pc.sum(pc.is_nan(col)).as_py() or 0)
        bounds = _column_bounds(fid, col)
        if bounds is not None:
            lower[fid], upper[fid] = _bound(fid, bounds[0]), _bound(fid, bounds[1])
    return {
        "value_counts": _kv(values),
        "null_value_counts": _kv(nulls),
        "nan_value_counts": _kv(nans) if nans else None,
        "lower_bounds": _kv(lower),
        "upper_bounds": _kv(upper),
    }


def _write_parquet(
    path: str, table: pa.Table, ids: Sequence[int], row_group_rows: int | None
) -> dict[str, Any]:
    """Write ``table`` and return the common ``data_file`` fields (sizes, split offsets, metrics)."""
    local = _local(path)
    Path(local).parent.mkdir(parents=True, exist_ok=True)
    collector: list[Any] = []
    pq.write_table(
        table, local, row_group_size=row_group_rows or max(1, table.num_rows), metadata_collector=collector
    )
    meta = collector[0]
    sizes = {fid: 0 for fid in ids}
    offsets = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        first = group.column(0)
        starts = [first.data_page_offset] + (
            [first.dictionary_page_offset] if first.has_dictionary_page else []
        )
        offsets.append(min(starts))
        for c, fid in enumerate(ids):
            sizes[fid] += group.column(c).total_compressed_size
    return {
        "file_path": path,
        "file_format": "PARQUET",
        "record_count": table.num_rows,
        "file_size_in_bytes": Path(local).stat().st_size,
        "column_sizes": _kv(sizes),
        "key_metadata": None,
        "split_offsets": sorted(offsets),
        **_metrics(table, ids),
    }


def _local(path: str) -> str:
    return path.removeprefix("file://")


def _dv_blob(positions: np.ndarray) -> bytes:
    """A ``deletion-vector-v1`` blob: BE length, magic, portable 64-bit Roaring, BE CRC-32 of magic+vector."""
    bitmap = BitMap64(positions.tolist())
    bitmap.run_optimize()  # run containers where positions are contiguous
    body = DV_MAGIC + bitmap.serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


# -- the table being built -------------------------------------------------------------------------------


class _Builder:
    def __init__(
        self, root: Path, format_version: int, partitioned: bool, seed: int, row_group_rows: int | None
    ):
        from pyiceberg.catalog.sql import SqlCatalog

        self.format_version = format_version
        self.partitioned = partitioned
        self.row_group_rows = row_group_rows
        self.rng = np.random.default_rng(seed)
        (root / "warehouse").mkdir(parents=True, exist_ok=True)
        self.catalog_uri = f"sqlite:///{root / 'catalog.db'}"
        self.warehouse = (root / "warehouse").as_uri()
        self.catalog = SqlCatalog(CATALOG_NAME, uri=self.catalog_uri, warehouse=self.warehouse)
        self.catalog.create_namespace(NAMESPACE)
        self.entry_schema = fastavro.parse_schema(_entry_schema(format_version, partitioned))
        self.list_schema = fastavro.parse_schema(_list_schema(format_version))
        self.manifests: list[_Manifest] = []
        self.data: list[_File] = []
        self.deletes: list[_File] = []
        self.snapshots: list[int] = []
        self.survivors: dict[int, tuple[int, np.ndarray]] = {}  # snapshot -> (data files, kept-row mask)
        self.eq_cache: EqCache = {}
        self.seq = 0
        self.next_row_id = 0
        self.clock_ms = int(time.time() * 1000)
        if format_version == 2:
            self.table: Any = self._create_v2()
            self.location = self.table.location().rstrip("/")
        else:
            self.location = f"{self.warehouse}/{NAMESPACE}/{TABLE}"  # where PyIceberg puts v2 tables
            self.metadata: dict[str, Any] = self._initial_v3()
            self.metadata_path = self._write_v3_metadata()

    def _uuid(self) -> str:
        return str(uuid.UUID(bytes=self.rng.bytes(16), version=4))

    def _create_v2(self) -> Any:
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import DayTransform
        from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

        schema = Schema(
            NestedField(ID, "id", LongType(), required=True),
            NestedField(TS, "ts", TimestampType(), required=False),
            NestedField(VALUE, "value", DoubleType(), required=False),
            NestedField(NAME, "name", StringType(), required=False),
            NestedField(CATEGORY, "category", StringType(), required=False),
        )
        spec = (
            PartitionSpec(PartitionField(TS, PARTITION_FIELD_ID, DayTransform(), "ts_day"))
            if self.partitioned
            else UNPARTITIONED_PARTITION_SPEC
        )
        table = self.catalog.create_table(
            IDENTIFIER, schema=schema, partition_spec=spec, properties={"format-version": "2"}
        )
        got = [(f.field_id, f.name) for f in table.schema().fields]
        if got != list(zip((ID, TS, VALUE, NAME, CATEGORY), COLUMNS, strict=True)):
            raise AssertionError(f"PyIceberg assigned other field ids: {got}")
        if self.partitioned and [f.field_id for f in table.spec().fields] != [PARTITION_FIELD_ID]:
            raise AssertionError(f"PyIceberg assigned another partition field id: {table.spec()}")
        return table

    def _initial_v3(self) -> dict[str, Any]:
        return {
            "format-version": 3,
            "table-uuid": self._uuid(),
            "location": self.location,
            "last-sequence-number": 0,
            "last-updated-ms": self.clock_ms,
            "last-column-id": CATEGORY,
            "current-schema-id": 0,
            "schemas": [_schema_json()],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": _spec_fields(self.partitioned)}],
            "last-partition-id": PARTITION_FIELD_ID if self.partitioned else PARTITION_FIELD_ID - 1,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {"write.delete.mode": "merge-on-read"},
            "refs": {},
            "snapshots": [],
            "snapshot-log": [],
            "metadata-log": [],
            "statistics": [],
            "partition-statistics": [],
            "next-row-id": 0,
        }

    def _write_v3_metadata(self) -> str:
        version = len(self.metadata["metadata-log"])
        path = f"{self.location}/metadata/{version:05d}-{self._uuid()}.metadata.json"
        Path(_local(path)).parent.mkdir(parents=True, exist_ok=True)
        Path(_local(path)).write_text(json.dumps(self.metadata, indent=2, ensure_ascii=False))
        return path

    # -- files --

    def data_file(self, day: int, table: pa.Table) -> _File:
        subdir = f"ts_day={dt.date(1970, 1, 1) + dt.timedelta(days=day)}/" if self.partitioned else ""
        path = f"{self.location}/data/{subdir}{len(self.data):05d}-{self._uuid()}.parquet"
        record = _write_parquet(path, table, (ID, TS, VALUE, NAME, CATEGORY), self.row_group_rows)
        record.update(content=0, equality_ids=None, sort_order_id=0, referenced_data_file=None)
        return _File(path, 0, day if self.partitioned else None, record, table=table)

    def position_file(self, deletes: dict[_File, np.ndarray]) -> _File:
        """One Parquet position delete file over the given data files (all in one partition)."""
        files = sorted(deletes, key=lambda f: f.path)
        paths = pa.array(
            np.repeat(np.array([f.path for f in files], dtype=object), [len(deletes[f]) for f in files])
        )
        pos = np.concatenate([np.sort(deletes[f]) for f in files]).astype(np.int64)
        table = pa.Table.from_arrays([paths.cast(pa.string()), pa.array(pos)], schema=POS_SCHEMA)
        day = self._one_day(files)
        subdir = self._part_dir(day)
        path = f"{self.location}/data/{subdir}pos-{self._uuid()}.parquet"
        record = _write_parquet(path, table, (FILE_PATH_ID, POS_ID), None)
        single = files[0].path if len(files) == 1 else None
        record.update(content=1, equality_ids=None, sort_order_id=None, referenced_data_file=single)
        return _File(path, 1, day, record, positions={f.path: np.sort(deletes[f]) for f in files})

    def equality_file(self, eq_ids: tuple[int, ...], keys: pa.Table, day: int | None) -> _File:
        path = f"{self.location}/data/{self._part_dir(day)}eq-{self._uuid()}.parquet"
        record = _write_parquet(path, keys, eq_ids, None)
        record.update(content=2, equality_ids=list(eq_ids), sort_order_id=0, referenced_data_file=None)
        return _File(path, 2, day, record, table=keys, eq_ids=eq_ids)

    def puffin_file(self, deletes: dict[_File, np.ndarray]) -> list[_File]:
        """One Puffin file holding a deletion vector per data file; one manifest entry per vector."""
        path = f"{self.location}/data/dv-{self._uuid()}.puffin"
        out = bytearray(PUFFIN_MAGIC)
        blobs, placed = [], []
        for data, positions in deletes.items():
            positions = np.unique(positions)
            blob = _dv_blob(positions)
            blobs.append(
                {
                    "type": "deletion-vector-v1",
                    "fields": [ROW_POSITION_ID],
                    "snapshot-id": -1,
                    "sequence-number": -1,
                    "offset": len(out),
                    "length": len(blob),
                    "properties": {"referenced-data-file": data.path, "cardinality": str(len(positions))},
                }
            )
            placed.append((data, positions, len(out), len(blob)))
            out += blob
        footer = json.dumps(
            {"blobs": blobs, "properties": {"created-by": "gpu_engine tests gen_table"}}
        ).encode()
        out += PUFFIN_MAGIC + footer + struct.pack("<i", len(footer)) + bytes(4) + PUFFIN_MAGIC
        Path(_local(path)).parent.mkdir(parents=True, exist_ok=True)
        Path(_local(path)).write_bytes(bytes(out))
        files = []
        for data, positions, offset, length in placed:
            record = {
                "content": 1,
                "file_path": path,
                "file_format": "PUFFIN",
                "record_count": len(positions),
                "file_size_in_bytes": len(out),
                "column_sizes": None,
                "value_counts": None,
                "null_value_counts": None,
                "nan_value_counts": None,
                "lower_bounds": None,
                "upper_bounds": None,
                "key_metadata": None,
                "split_offsets": None,
                "equality_ids": None,
                "sort_order_id": None,
                "referenced_data_file": data.path,
                "content_offset": offset,
                "content_size_in_bytes": length,
            }
            files.append(_File(path, 1, data.day, record, positions={data.path: positions}, is_dv=True))
        return files

    def _one_day(self, files: Iterable[_File]) -> int | None:
        days = {f.day for f in files}
        if len(days) != 1:
            raise AssertionError(f"files of one delete file span partitions {days}")
        return days.pop()

    def _part_dir(self, day: int | None) -> str:
        return "" if day is None else f"ts_day={dt.date(1970, 1, 1) + dt.timedelta(days=day)}/"

    # -- manifests, snapshots --

    def _write_manifest(self, manifest: _Manifest) -> None:
        manifest.path = f"{self.location}/metadata/{self._uuid()}-m0.avro"
        records = []
        for status, f in manifest.entries:
            added = status == 1 and f.seq == manifest.seq
            record = dict(f.record)
            record["partition"] = {"ts_day": f.day} if self.partitioned else {}
            if self.format_version >= 3:
                record.setdefault("content_offset", None)
                record.setdefault("content_size_in_bytes", None)
                record["first_row_id"] = None  # data files here are always new: assigned by inheritance
            else:
                record.pop("content_offset", None)
                record.pop("content_size_in_bytes", None)
            records.append(
                {
                    "status": status,
                    "snapshot_id": manifest.snapshot_id if status != 0 else f.snapshot_id,
                    "sequence_number": None if added else f.seq,
                    "file_sequence_number": None if added else f.seq,
                    "data_file": record,
                }
            )
        meta = {
            "schema": json.dumps(_schema_json()),
            "schema-id": "0",
            "partition-spec": json.dumps(_spec_fields(self.partitioned)),
            "partition-spec-id": "0",
            "format-version": str(self.format_version),
            "content": "deletes" if manifest.content else "data",
        }
        local = Path(_local(manifest.path))
        local.parent.mkdir(parents=True, exist_ok=True)
        with local.open("wb") as out:
            fastavro.writer(out, self.entry_schema, records, metadata=meta, codec="deflate")
        manifest.length = local.stat().st_size

    def _list_record(self, m: _Manifest) -> dict[str, Any]:
        def count(status: int, rows: bool) -> int:
            return sum(f.record["record_count"] if rows else 1 for s, f in m.entries if s == status)

        live = [f.seq for s, f in m.entries if s != 2]
        days = [f.day for _, f in m.entries if f.day is not None]
        partitions = []
        if self.partitioned:
            partitions.append(
                {
                    "contains_null": False,
                    "contains_nan": False,
                    "lower_bound": struct.pack("<i", min(days)),
                    "upper_bound": struct.pack("<i", max(days)),
                }
            )
        record = {
            "manifest_path": m.path,
            "manifest_length": m.length,
            "partition_spec_id": 0,
            "content": m.content,
            "sequence_number": m.seq,
            "min_sequence_number": min(live) if live else m.seq,
            "added_snapshot_id": m.snapshot_id,
            "added_files_count": count(1, False),
            "existing_files_count": count(0, False),
            "deleted_files_count": count(2, False),
            "added_rows_count": count(1, True),
            "existing_rows_count": count(0, True),
            "deleted_rows_count": count(2, True),
            "partitions": partitions,
            "key_metadata": None,
        }
        if self.format_version >= 3:
            record["first_row_id"] = m.first_row_id
        return record

    def commit(
        self,
        operation: str,
        data: Sequence[_File] = (),
        deletes: Sequence[_File] = (),
        remove: Sequence[_File] = (),
    ) -> int:
        self.seq += 1
        seq, sid = self.seq, int(self.rng.integers(1, 2**62))
        parent = self.snapshots[-1] if self.snapshots else None
        for f in (*data, *deletes):
            f.seq, f.snapshot_id = seq, sid
        new: list[_Manifest] = []
        for start in range(0, len(data), MANIFEST_ENTRIES):
            new.append(_Manifest(0, [(1, f) for f in data[start : start + MANIFEST_ENTRIES]], sid, seq))
        if deletes:
            new.append(_Manifest(1, [(1, f) for f in deletes], sid, seq))
        kept = []
        for m in self.manifests:
            if not any(f in remove for _, f in m.entries):
                kept.append(m)
                continue
            # rewrite: removed files become DELETED, the others EXISTING; earlier DELETED entries go
            entries = [(2 if f in remove else 0, f) for s, f in m.entries if s != 2]
            new.append(_Manifest(m.content, entries, sid, seq))
        for m in new:
            self._write_manifest(m)
        first_row_id = self.next_row_id
        if self.format_version >= 3:
            for m in new:
                if m.content == 0:
                    m.first_row_id = self.next_row_id
                    self.next_row_id += sum(f.record["record_count"] for s, f in m.entries if s != 2)
        self.manifests = new + kept
        list_path = f"{self.location}/metadata/snap-{sid}-1-{self._uuid()}.avro"
        meta = {
            "snapshot-id": str(sid),
            "parent-snapshot-id": str(parent) if parent is not None else "null",
            "sequence-number": str(seq),
            "format-version": str(self.format_version),
        }
        if self.format_version >= 3:
            meta["first-row-id"] = str(first_row_id)
        with Path(_local(list_path)).open("wb") as out:
            records = [self._list_record(m) for m in self.manifests]
            fastavro.writer(out, self.list_schema, records, metadata=meta, codec="deflate")

        self.data += list(data)
        self.deletes = [f for f in self.deletes if f not in remove] + list(deletes)
        self.clock_ms += 1
        summary = self._summary(data, deletes, remove)
        snapshot = {
            "snapshot-id": sid,
            "sequence-number": seq,
            "timestamp-ms": self.clock_ms,
            "manifest-list": list_path,
            "summary": {"operation": operation, **summary},
            "schema-id": 0,
        }
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        if self.format_version == 2:
            self._commit_v2(snapshot, parent, operation, summary)
        else:
            snapshot.update({"first-row-id": first_row_id, "added-rows": self.next_row_id - first_row_id})
            self._commit_v3(snapshot)
        self.snapshots.append(sid)
        self.survivors[sid] = (
            len(self.data),
            _surviving(self.data, self.deletes, self.partitioned, self.eq_cache),
        )
        return sid

    def _summary(
        self, data: Sequence[_File], deletes: Sequence[_File], remove: Sequence[_File]
    ) -> dict[str, str]:
        def rows(files: Iterable[_File], content: int) -> int:
            return sum(f.record["record_count"] for f in files if f.content == content)

        dvs = [f for f in deletes if f.is_dv]
        out = {
            "added-data-files": len(data),
            "added-records": rows(data, 0),
            "added-files-size": sum(f.record["file_size_in_bytes"] for f in data),
            "added-delete-files": len(deletes),
            "added-position-delete-files": sum(1 for f in deletes if f.content == 1 and not f.is_dv),
            "added-equality-delete-files": sum(1 for f in deletes if f.content == 2),
            "added-dvs": len(dvs),
            "added-position-deletes": rows(deletes, 1),
            "added-equality-deletes": rows(deletes, 2),
            "removed-delete-files": len(remove),
            "removed-dvs": sum(1 for f in remove if f.is_dv),
            "removed-position-deletes": rows(remove, 1),
            "total-records": rows(self.data, 0),
            "total-data-files": len(self.data),
            "total-delete-files": len(self.deletes),
            "total-position-deletes": rows(self.deletes, 1),
            "total-equality-deletes": rows(self.deletes, 2),
            "total-files-size": sum(f.record["file_size_in_bytes"] for f in (*self.data, *self.deletes)),
        }
        return {k: str(v) for k, v in out.items() if v or k.startswith("total-")}

    def _commit_v2(
        self, snapshot: dict[str, Any], parent: int | None, operation: str, summary: dict[str, str]
    ) -> None:
        from pyiceberg.table.refs import SnapshotRefType
        from pyiceberg.table.snapshots import Operation, Snapshot, Summary
        from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

        model = Snapshot.model_validate({**snapshot, "summary": Summary(Operation(operation), **summary)})
        self.catalog.commit_table(
            self.table,
            requirements=(AssertRefSnapshotId.model_validate({"ref": "main", "snapshot-id": parent}),),
            updates=(
                AddSnapshotUpdate(snapshot=model),
                SetSnapshotRefUpdate.model_validate(
                    {
                        "ref-name": "main",
                        "type": SnapshotRefType.BRANCH,
                        "snapshot-id": snapshot["snapshot-id"],
                    }
                ),
            ),
        )
        self.table = self.catalog.load_table(IDENTIFIER)

    def _commit_v3(self, snapshot: dict[str, Any]) -> None:
        md = self.metadata
        md["metadata-log"].append(
            {"timestamp-ms": md["last-updated-ms"], "metadata-file": self.metadata_path}
        )
        md["last-sequence-number"] = snapshot["sequence-number"]
        md["last-updated-ms"] = snapshot["timestamp-ms"]
        md["current-snapshot-id"] = snapshot["snapshot-id"]
        md["refs"] = {"main": {"snapshot-id": snapshot["snapshot-id"], "type": "branch"}}
        md["snapshots"].append(snapshot)
        md["snapshot-log"].append(
            {"timestamp-ms": snapshot["timestamp-ms"], "snapshot-id": snapshot["snapshot-id"]}
        )
        md["next-row-id"] = self.next_row_id
        self.metadata_path = self._write_v3_metadata()

    def finish(self) -> str:
        """The current metadata file (plain path); v3: registered in the catalog now."""
        if self.format_version == 2:
            return _local(str(self.table.metadata_location))
        self.catalog.register_table(IDENTIFIER, self.metadata_path)
        return _local(self.metadata_path)


# -- which rows survive (spec "Scan Planning" scope rules) ------------------------------------------------


def _eq_match(table: pa.Table, eq_ids: tuple[int, ...], keys: pa.Table) -> np.ndarray:
    """Rows of ``table`` equal on all ``eq_ids`` columns to some row of ``keys`` (NULL matches NULL)."""
    n = table.num_rows
    valid = np.ones(n, dtype=bool)
    code = np.zeros(n, dtype=np.int64)
    key_code = np.zeros(keys.num_rows, dtype=np.int64)
    stride = 1
    for fid in eq_ids:
        name = COLUMNS[fid - 1]
        uniq = pc.unique(keys.column(name).combine_chunks())
        found = pc.index_in(table.column(name), value_set=uniq, skip_nulls=False)
        valid &= found.is_valid().to_numpy(zero_copy_only=False)
        code += found.fill_null(0).to_numpy().astype(np.int64) * stride
        key_code += (
            pc.index_in(keys.column(name), value_set=uniq, skip_nulls=False).to_numpy().astype(np.int64)
            * stride
        )
        stride *= max(1, len(uniq))
    if len(eq_ids) == 1:
        return valid  # every value of ``uniq`` is a key
    if stride <= 1 << 26:  # a bitmap over the code range
        return valid & np.isin(code, key_code, kind="table")
    return valid & np.isin(code, key_code, kind="sort")


EqCache = dict[tuple[int, ...], tuple[int, np.ndarray]]  # delete group -> (rows checked, rows it deletes)


class _ExpectedAt(Mapping[int, pa.Table]):
    """Surviving rows by snapshot id, filtered on first access (a 10M-row filter costs about a second)."""

    def __init__(self, data: Sequence[_File], survivors: dict[int, tuple[int, np.ndarray]]):
        self._data = [d.table for d in data]
        self._survivors = survivors
        self._tables: dict[int, pa.Table] = {}

    def __getitem__(self, snapshot_id: int) -> pa.Table:
        if snapshot_id not in self._tables:
            files, keep = self._survivors[snapshot_id]
            self._tables[snapshot_id] = pa.concat_tables(self._data[:files]).filter(pa.array(keep))
        return self._tables[snapshot_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._survivors)

    def __len__(self) -> int:
        return len(self._survivors)


def _surviving(
    data: Sequence[_File], deletes: Sequence[_File], partitioned: bool, cache: EqCache
) -> np.ndarray:
    """Which rows of ``data`` (concatenated) no live delete applies to; one vectorised pass per delete group.

    ``data`` only grows between calls (files are appended, never removed), so an equality delete group's
    matches among the rows already checked are taken from ``cache``.
    """
    tables = [d.table for d in data if d.table is not None]
    rows = pa.concat_tables(tables)
    sizes = [t.num_rows for t in tables]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    seq_of_row = np.repeat(np.array([d.seq for d in data], dtype=np.int64), sizes)
    day_of_row = np.repeat(np.array([-1 if d.day is None else d.day for d in data], dtype=np.int64), sizes)
    deleted = np.zeros(rows.num_rows, dtype=bool)
    index = {d.path: (i, d) for i, d in enumerate(data)}
    dv_of: dict[str, _File] = {}
    for x in deletes:
        for path in x.positions if x.is_dv else ():
            if path in dv_of:
                raise AssertionError(f"two deletion vectors for {path}")
            dv_of[path] = x
    for x in deletes:  # position deletes: same partition, data seq <= delete seq; a DV replaces pos files
        for path, positions in x.positions.items():
            i, d = index[path]
            in_scope = x.seq >= d.seq and (not partitioned or x.day == d.day)
            if in_scope and dv_of.get(path, x) is x:
                deleted[offsets[i] + positions] = True
    groups: dict[tuple[tuple[int, ...], int, int | None], list[_File]] = {}
    for x in deletes:  # equality deletes: same partition, data seq < delete seq
        if x.content == 2:
            groups.setdefault((x.eq_ids, x.seq, x.day if partitioned else None), []).append(x)
    for (eq_ids, seq, day), files in groups.items():
        key = tuple(id(x) for x in files)
        checked, hits = cache.get(key, (0, np.empty(0, dtype=np.int64)))
        scope = seq_of_row[checked:] < seq
        if day is not None:
            scope &= day_of_row[checked:] == day
        where = np.flatnonzero(scope) + checked
        if where.size:
            candidates = rows.select([COLUMNS[f - 1] for f in eq_ids]).take(pa.array(where))
            keys = pa.concat_tables([x.table for x in files if x.table is not None])
            hits = np.concatenate([hits, where[_eq_match(candidates, eq_ids, keys)]])
        cache[key] = (rows.num_rows, hits)
        deleted[hits] = True
    return ~deleted


# -- data ------------------------------------------------------------------------------------------------


def _rows(rng: np.random.Generator, ids: np.ndarray, day: int, cats: np.ndarray | None = None) -> pa.Table:
    """Rows with the given ids on one day; ``cats`` fixes the category codes (-1: null)."""
    n = len(ids)
    ts = (day * MICROS_PER_DAY + rng.integers(0, MICROS_PER_DAY, n)).astype("datetime64[us]")
    value = np.round(rng.normal(0.0, 1000.0, n), 3)
    u = rng.random(n)
    value[u < 0.01] = np.nan
    value[(u >= 0.01) & (u < 0.02)] = -0.0
    value[(u >= 0.02) & (u < 0.03)] = 0.0
    name_idx = pa.array(rng.integers(0, len(NAMES), n), mask=rng.random(n) < 0.01)
    if cats is None:
        cats = np.where(rng.random(n) < 0.01, -1, rng.integers(0, len(CATEGORIES), n))
    cat_idx = pa.array(np.maximum(cats, 0), mask=cats < 0)
    arrays = [
        pa.array(ids, pa.int64()),
        pa.array(ts),
        pa.array(value, mask=(u >= 0.03) & (u < 0.04)),
        NAMES.take(name_idx),
        CATEGORIES.take(cat_idx),
    ]
    return pa.Table.from_arrays(arrays, schema=DATA_SCHEMA)


def _cat_codes(table: pa.Table) -> np.ndarray:
    codes = pc.index_in(table.column("category"), value_set=CATEGORIES)
    return np.asarray(codes.fill_null(-1).to_numpy(), dtype=np.int64)


def _sample(rng: np.random.Generator, n: int, fraction: float) -> np.ndarray:
    k = min(n, max(1, round(n * fraction)))
    return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)


def _key_table(eq_ids: tuple[int, ...], columns: dict[int, pa.Array]) -> pa.Table:
    fields = [DATA_SCHEMA.field(fid - 1) for fid in eq_ids]
    return pa.Table.from_arrays([columns[fid] for fid in eq_ids], schema=pa.schema(fields))


class _Scenario:
    """The initial data plus helpers shared by the kinds."""

    def __init__(self, b: _Builder, rows: int, files: int, delete_fraction: float, rounds: int):
        self.b, self.rng, self.fraction, self.rounds = b, b.rng, delete_fraction, rounds
        counts = np.full(files, rows // files)
        counts[: rows % files] += 1
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        self.days = [FIRST_DAY + k // 3 for k in range(files)]
        self.files: list[_File] = []
        self.cat_by_id = np.empty(rows, dtype=np.int64)
        for k in range(files):
            ids = self.rng.permutation(np.arange(self.starts[k], self.starts[k + 1], dtype=np.int64))
            table = _rows(self.rng, ids, self.days[k])
            self.cat_by_id[ids] = _cat_codes(table)
            self.files.append(b.data_file(self.days[k], table))
        self.cross_partition: list[int] = []  # ids deleted only in a wrong partition: never re-appended
        self.file_of_id = np.repeat(np.arange(files), counts)
        self.day_of_id = np.array(self.days, dtype=np.int64)[self.file_of_id]
        b.commit("append", data=self.files)

    def day_key(self, day: int) -> int | None:
        return day if self.b.partitioned else None

    def position_rounds(self, fraction: float) -> tuple[dict[_File, np.ndarray], dict[_File, np.ndarray]]:
        """Deleted positions per data file for two commits: the second overlaps the first in part."""
        n = len(self.files)
        first_set = [k for k in range(n) if k % 4 != 3]
        second_set = [k for k in range(n) if k % 3 == 0]
        touched = sorted(set(first_set) | set(second_set))
        touched_rows = sum(int(self.starts[k + 1] - self.starts[k]) for k in touched)
        per_file = min(1.0, fraction * int(self.starts[-1]) / max(1, touched_rows))
        first: dict[_File, np.ndarray] = {}
        second: dict[_File, np.ndarray] = {}
        for k in touched:
            f = self.files[k]
            chosen = _sample(self.rng, f.record["record_count"], per_file)
            if k in first_set and k in second_set:
                split = self.rng.random(len(chosen)) < 0.6
                first[f] = chosen[split] if split.any() else chosen[:1]
                overlap = first[f][: (len(first[f]) + 1) // 2]
                second[f] = np.union1d(chosen[~split], overlap)
            elif k in first_set:
                first[f] = chosen
            else:
                second[f] = chosen
        if n >= 5:  # one data file deleted entirely
            last = self.files[-1]
            second[last] = np.arange(last.record["record_count"], dtype=np.int64)
        return first, second

    def grouped_position_files(self, deletes: dict[_File, np.ndarray]) -> list[_File]:
        """Delete files covering up to three data files each (consecutive files share a partition)."""
        out = []
        for g in range(0, len(self.files), 3):
            group = {f: deletes[f] for f in self.files[g : g + 3] if f in deletes}
            if group:
                out.append(self.b.position_file(group))
        return out

    def extra_data(self, ids: np.ndarray, null_names: bool = False) -> list[_File]:
        """New data files re-using ``ids`` (same category), in the partition of each id's original file."""
        ids = ids[~np.isin(ids, np.array(self.cross_partition, dtype=np.int64))]
        out = []
        for day in np.unique(self.day_of_id[ids]).tolist():
            mine = ids[self.day_of_id[ids] == day]
            table = _rows(self.rng, mine, day, cats=self.cat_by_id[mine])
            if null_names:
                mask = pa.array(self.rng.random(len(mine)) < 0.5)
                names = pc.if_else(mask, pa.scalar(None, pa.string()), table.column("name"))
                table = table.set_column(NAME - 1, DATA_SCHEMA.field(NAME - 1), names)
            out.append(self.b.data_file(day, table))
        return out

    def id_deletes(self, ids: np.ndarray, decoys: bool) -> list[_File]:
        """Equality deletes on ``id`` (per partition when partitioned); decoys delete nothing."""
        ids = np.unique(ids)
        by_day: dict[int | None, list[int]] = {}
        if self.b.partitioned:
            for day in np.unique(self.day_of_id[ids]).tolist():
                by_day[day] = ids[self.day_of_id[ids] == day].tolist()
        else:
            by_day[None] = ids.tolist()
        if decoys:
            days = list(by_day)
            if len(days) > 1 and len(by_day[days[0]]) > 1:  # a real id, in a partition where it is not
                by_day[days[1]].append(by_day[days[0]].pop())
                self.cross_partition.append(by_day[days[1]][-1])
            by_day[days[0]] += [-5, int(self.starts[-1]) + 1_000_000]  # ids no row has
        out = []
        for day, keys in by_day.items():
            if not self.b.partitioned and len(keys) > 2:  # two files, one key in both
                half = len(keys) // 2
                chunks = [keys[: half + 1], keys[half:]]
            else:
                chunks = [keys]
            for chunk in chunks:
                if chunk:
                    table = _key_table((ID,), {ID: pa.array(chunk, pa.int64())})
                    out.append(self.b.equality_file((ID,), table, day))
        return out

    def null_name_deletes(self) -> list[_File]:
        """``name IS NULL`` (and one concrete name) as equality deletes, in every partition."""
        keys = _key_table((NAME,), {NAME: pa.array([None, NAMES[7].as_py()], pa.string())})
        days = sorted({self.day_key(d) for d in self.days}, key=lambda d: -1 if d is None else d)
        return [self.b.equality_file((NAME,), keys, day) for day in days]

    def random_ids(self, fraction: float) -> np.ndarray:
        total = int(self.starts[-1])
        return np.sort(
            self.rng.choice(total, size=min(total, max(1, round(total * fraction))), replace=False)
        )


def _kind_position(s: _Scenario) -> None:
    first, second = s.position_rounds(s.fraction)
    s.b.commit("delete", deletes=s.grouped_position_files(first))
    singles = [s.b.position_file({f: pos}) for f, pos in second.items()]
    (new,) = s.extra_data(s.random_ids(0.001)[:1].repeat(3))  # three rows re-using one id
    singles.append(s.b.position_file({new: np.array([0, 2], dtype=np.int64)}))
    s.b.commit("overwrite", data=[new], deletes=singles)


def _kind_dv(s: _Scenario) -> None:
    first, second = s.position_rounds(s.fraction)
    dvs = s.b.puffin_file(first)
    s.b.commit("delete", deletes=dvs)
    old = {next(iter(f.positions)): f for f in dvs}
    merged = {f: np.union1d(pos, first[f]) if f in first else pos for f, pos in second.items()}
    (new,) = s.extra_data(s.random_ids(0.001)[:1].repeat(3))
    merged[new] = np.array([1], dtype=np.int64)
    replaced = [old[f.path] for f in second if f.path in old]
    s.b.commit("overwrite", data=[new], deletes=s.b.puffin_file(merged), remove=replaced)


def _kind_equality(s: _Scenario) -> None:
    targets = s.random_ids(s.fraction)
    s.b.commit("delete", deletes=s.id_deletes(targets, decoys=True) + s.null_name_deletes())
    reused = targets[s.rng.random(len(targets)) < 0.25]
    reused = reused if reused.size else targets[:1]
    s.b.commit("append", data=s.extra_data(reused, null_names=True))
    again = np.union1d(reused[::2], s.random_ids(s.fraction / 5))
    s.b.commit("delete", deletes=s.id_deletes(again, decoys=False))


def _kind_upserts(s: _Scenario) -> None:
    for _ in range(s.rounds):
        ids = s.random_ids(s.fraction)
        s.b.commit("overwrite", data=s.extra_data(ids[::2]), deletes=s.id_deletes(ids, decoys=False))


def _kind_mixed(s: _Scenario) -> None:
    first, _ = s.position_rounds(s.fraction * 0.4)
    s.b.commit("delete", deletes=s.grouped_position_files(first))
    id_targets = s.random_ids(s.fraction * 0.3)
    s.b.commit("delete", deletes=s.id_deletes(id_targets, decoys=True) + s.null_name_deletes())
    pair_targets = s.random_ids(s.fraction * 0.3)
    s.b.commit("delete", deletes=_pair_deletes(s, pair_targets))
    reused = np.union1d(
        id_targets[:: max(1, len(id_targets) // 5)], pair_targets[:: max(1, len(pair_targets) // 5)]
    )
    new = s.extra_data(reused, null_names=True)
    pos = [s.b.position_file({f: np.array([0], dtype=np.int64)}) for f in new]
    s.b.commit("overwrite", data=new, deletes=pos)


def _pair_deletes(s: _Scenario, ids: np.ndarray) -> list[_File]:
    """Equality deletes on (category, id): real pairs (NULL category included) and decoy pairs."""
    decoy, real = ids[: max(1, len(ids) // 10)], ids[max(1, len(ids) // 10) :]
    null_cat = np.flatnonzero(s.cat_by_id < 0)[:2]  # rows with a NULL category: deleted by a NULL key
    real = np.union1d(real, null_cat)
    dc = s.cat_by_id[decoy]
    wrong = np.where(dc >= 0, -1, 0)  # a NULL key for a non-null category, a real one for a NULL
    wrong[::2] = np.where(dc >= 0, (dc + 1) % len(CATEGORIES), 0)[::2]  # or another category
    all_ids = np.concatenate([real, decoy])
    all_cats = np.concatenate([s.cat_by_id[real], wrong])
    out = []
    for day in np.unique(s.day_of_id[all_ids]).tolist() if s.b.partitioned else [None]:
        sel = np.ones(len(all_ids), dtype=bool) if day is None else s.day_of_id[all_ids] == day
        cat_arr = CATEGORIES.take(pa.array(np.maximum(all_cats[sel], 0), mask=all_cats[sel] < 0))
        keys = _key_table((CATEGORY, ID), {CATEGORY: cat_arr, ID: pa.array(all_ids[sel], pa.int64())})
        out.append(s.b.equality_file((CATEGORY, ID), keys, day))
    return out


_KINDS = {
    "position": (_kind_position, 2),
    "dv": (_kind_dv, 3),
    "equality": (_kind_equality, 2),
    "upserts": (_kind_upserts, 2),
    "mixed": (_kind_mixed, 2),
}


def generate(
    root: Path,
    *,
    kind: Kind,
    rows: int,
    files: int,
    delete_fraction: float,
    format_version: int,
    seed: int,
    partitioned: bool = False,
    row_group_rows: int | None = None,
    rounds: int = 6,
) -> GeneratedDeletesTable:
    """Write table ``db.t`` with deletes of ``kind`` under ``root`` (which must hold no catalog yet)."""
    script, needed = _KINDS[kind]
    if format_version != needed:
        raise ValueError(f"kind {kind!r} is written as a v{needed} table, not v{format_version}")
    if files < 1 or rows < files or not 0.0 < delete_fraction < 1.0:
        raise ValueError(f"need rows >= files >= 1 and 0 < delete_fraction < 1 ({rows=}, {files=})")
    if (root / "catalog.db").exists():
        raise FileExistsError(f"{root} already holds a generated table")
    start = time.perf_counter()
    builder = _Builder(root, format_version, partitioned, seed, row_group_rows)
    script(_Scenario(builder, rows, files, delete_fraction, rounds))
    metadata_location = builder.finish()
    expected_at = _ExpectedAt(builder.data, builder.survivors)
    return GeneratedDeletesTable(
        metadata_location=metadata_location,
        catalog_uri=builder.catalog_uri,
        catalog_name=CATALOG_NAME,
        warehouse=builder.warehouse,
        identifier=IDENTIFIER,
        format_version=format_version,
        kind=kind,
        partitioned=partitioned,
        expected=expected_at[builder.snapshots[-1]],
        snapshots=tuple(builder.snapshots),
        expected_at=expected_at,
        generate_s=round(time.perf_counter() - start, 3),
    )
