"""Independent readers of the fixture tables, for the scan-execution tests to compare our engine against.

Three sources of truth, none of which goes through gpu_engine's metadata, manifest or data readers: only
its path helpers (:func:`gpu_engine.io.paths.normalize`, :class:`~gpu_engine.io.paths.PathMap`) are
shared; the current metadata file is chosen here.

- :func:`pyiceberg_rows`: PyIceberg 0.12's ``StaticTable`` over the fixture's current metadata file, read in
  place through a FileIO that applies the table's path map. PyIceberg matches position deletes to data
  files by raw string equality of the delete file's ``file_path`` column and the manifest's
  ``data_file.file_path``; in the Impala tables those spellings differ (``hdfs://localhost:20500/x`` vs
  ``/x``), so PyIceberg would silently apply no deletes. The FileIO therefore serves each Parquet
  position-delete file as a temporary copy whose ``file_path`` values are respelled as the manifest
  spells the same (normalised) data file.
- :func:`duckdb_rows`: DuckDB's ``iceberg_scan`` over a path-remapped temporary copy of the table's
  metadata (metadata JSON, manifest lists, manifests, position-delete files; written with json, fastavro
  and pyarrow), whose paths point to the fixture's data files in place.
- :func:`expected_rows` / :func:`expected_row_count`: results the fixtures ship or document.

:func:`assert_same_rows` compares two results as multisets of rows. ``PYICEBERG_CANNOT`` and
``DUCKDB_CANNOT`` list the tables each oracle cannot read (``test_oracles.py`` keeps them honest);
``KNOWN_WRONG`` lists results an oracle returns that are known to be wrong. Typical use::

    if rel in DUCKDB_CANNOT:
        pytest.skip(DUCKDB_CANNOT[rel].reason)
    assert_same_rows(ours, duckdb_rows(rel), context=f"{rel}: engine vs DuckDB")

Results are tables in the Iceberg schema's column order; the temporary copies live under one
``tempfile.mkdtemp`` root per process (removed at exit) and are made once per table.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import gzip
import hashlib
import json
import math
import re
import shutil
import struct
import tempfile
import threading
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO
from pyiceberg.table import StaticTable

from gpu_engine.io.paths import PathMap, normalize

from ..planning._support import FIXTURES, PATH_FIELD_ID, SHARED, RemappingFileIO, extra_path_map, inventory

__all__ = [
    "DUCKDB_CANNOT",
    "HAND_CHECKED",
    "KNOWN_WRONG",
    "PYICEBERG_CANNOT",
    "Limit",
    "OracleUnavailable",
    "assert_same_rows",
    "current_metadata_file",
    "duckdb_rows",
    "expected_row_count",
    "expected_rows",
    "metadata_json",
    "pyiceberg_rows",
    "remapped_copy",
    "table_path_map",
]


class OracleUnavailable(Exception):
    """An oracle cannot produce the rows of a table (a limit of that reader, not a wrong answer)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Limit:
    """Why an oracle cannot read a table; ``match`` is a regex its :class:`OracleUnavailable` must match."""

    reason: str
    match: str


_EQ = "PyIceberg 0.12 does not read equality deletes (plan_files raises)"
_EQ_MATCH = r"equality deletes"

# Tables (relative to shared/) PyIceberg cannot read at their current snapshot, and why.
PYICEBERG_CANNOT: dict[str, Limit] = {
    **{
        f"fixtures/{rel}": Limit(_EQ, _EQ_MATCH)
        for rel in (
            "dremio-oss/iceberg/v2/products_with_eq_deletes",
            "duckdb-iceberg/data/persistent/equality_delete_cross_partition/warehouse/ns/t",
            "duckdb-iceberg/data/persistent/equality_delete_extra_column/warehouse/ns/t",
            "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable",
            "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_both_eq_and_pos",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_multi_eq_ids",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_nulls",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_partition_evolution",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_partitioned",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_pos_and_multi_eq_ids",
            "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_equality_delete_schema_evolution",
        )
    },
    **{
        f"fixtures/duckdb-iceberg/data/persistent/partition_{t}/default.db/partition_{t}": Limit(
            "the required identity-partition column is not in the (DuckDB-written) data files, only in the "
            "partition tuple; PyIceberg 0.12 raises ResolveError instead of filling it from the partition",
            r"ResolveError: Field is required, and could not be found in the file",
        )
        for t in ("fixed_length_binary", "time", "timestamp", "timestamptz")
    },
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/airports_parquet": Limit(
        "Hive-written Parquet without field ids and no schema.name-mapping.default: PyIceberg 0.12 refuses "
        "to resolve columns (DuckDB falls back to names)",
        r"does not have field-ids",
    ),
    "fixtures/impala/iceberg_test/iceberg_migrated_complex_test": Limit(
        "pyarrow cannot open the Hive-written Parquet file (Logical type Null on a group node)",
        r"Logical type Null cannot be applied to group node",
    ),
    **{
        f"fixtures/impala/iceberg_test/iceberg_v3/{t}": Limit(
            "PyIceberg 0.12 cannot parse metadata with the v3 'variant' type (pydantic validation error)",
            r"cannot load .*Unsupported field type: 'variant'",
        )
        for t in ("trino_variant", "trino_nested_variant")
    },
}

# Tables (relative to shared/) DuckDB's iceberg extension cannot read at their current snapshot, and why.
DUCKDB_CANNOT: dict[str, Limit] = {
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_null_delete_record": Limit(
        "position-delete files hold NULL file_path values (malformed input); DuckDB 1.5.5 segfaults on them "
        "nondeterministically, so the oracle refuses to run it (PyIceberg ignores the NULL rows)",
        r"DuckDB not run on .*NULL file_path",
    ),
    "fixtures/impala/iceberg_test/iceberg_migrated_complex_test": Limit(
        "the Hive-written Parquet file's legacy map/struct layout does not bind to the Iceberg schema "
        "(Binder Error: MAP(BOOLEAN, INTEGER) to VARCHAR)",
        r"Can't change source type \(MAP\(BOOLEAN, INTEGER\)\)",
    ),
    "fixtures/impala/iceberg_test/iceberg_v3/trino_variant": Limit(
        "DuckDB reads the v3 variant column but cannot export its VARIANT type to Arrow",
        r"Unsupported Arrow type VARIANT",
    ),
    "fixtures/impala/iceberg_test/iceberg_v3/trino_nested_variant": Limit(
        "a variant nested in a struct: DuckDB cannot cast the Parquet STRUCT(metadata BLOB, value BLOB) "
        "to VARIANT",
        r"Can't change source type \(STRUCT\(metadata BLOB, \"value\" BLOB\)\) to target type",
    ),
}

# (oracle, table) -> why the rows that oracle returns are known to be wrong. The tests check that the
# answer is still wrong (against the other oracle or the shipped results) and compare nothing else to it.
_CROSS_PARTITION = "fixtures/duckdb-iceberg/data/persistent/equality_delete_cross_partition/warehouse/ns/t"
_AIRPORTS = "fixtures/impala/iceberg_test/hadoop_catalog/ice/airports_parquet"
KNOWN_WRONG: dict[tuple[str, str], str] = {
    ("pyiceberg", "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_alltypes_part"): (
        "PyIceberg 0.12 decodes the v1 manifest's identity-partition double p_double = 2.222 as "
        "2.2219998836517334 (rounded through float32; plan_files' DataFile.partition already shows it); "
        "the Hive-written data files do not hold the partition columns, so every row gets the wrong value"
    ),
    ("duckdb", _AIRPORTS): (
        "the Hive-written file has no field ids and the table no name mapping: DuckDB 1.5.5 returns every "
        "column as NULL (3376 all-null rows) instead of resolving the columns by name"
    ),
    ("duckdb", _CROSS_PARTITION): (
        "DuckDB 1.5.5 applies the partition-scoped equality delete (part=0, key=100) to partition part=1 "
        "too; the spec applies an equality delete only to data files of its own partition unless its spec "
        "is unpartitioned, so p1-k100 must survive"
    ),
}

# Tables with one snapshot, no deletes and no schema change, whose rows are exactly the contents of these
# data files (globs relative to the table directory) as pyarrow reads them by column name: the reference
# where no trusted Iceberg reader can read the table.
_DIRECT_FILES: dict[str, str] = {
    _AIRPORTS: "000000_0",
    "fixtures/impala/iceberg_test/iceberg_v3/trino_variant": "data/*.parquet",  # unshredded variant
    "fixtures/impala/iceberg_test/iceberg_v3/trino_nested_variant": "data/*.parquet",
}

# Rows derived by hand from the spec's rules and the table's files, for tables no trusted oracle reads.
# (HAND_CHECKED, below, names every table whose expected_rows come from here or from _DIRECT_FILES.)
_SPEC_DERIVED: dict[str, list[dict[str, Any]]] = {
    # data part=0: (100, p0-k100), (999, p0-k999); part=1: (100, p1-k100), (888, p1-k888);
    # equality delete key=100 in partition part=0 (seq 2 > data seq 1)
    _CROSS_PARTITION: [
        {"part": 0, "key": 999, "val": "p0-k999"},
        {"part": 1, "key": 100, "val": "p1-k100"},
        {"part": 1, "key": 888, "val": "p1-k888"},
    ],
}

# Row counts the fixtures document (SOURCES.md), for tables where no row-level results ship.
_DOCUMENTED_COUNTS = {
    "fixtures/dremio-oss/iceberg/v2/products_with_eq_deletes": 450,  # 1000 inserted, 550 deleted
}
# Tables whose full contents at the last snapshot ship as Parquet (Spark's reading) plus count.csv.
_EXPECTED_RESULTS = {
    f"fixtures/duckdb-iceberg/data/iceberg/generated_spec{v}_0_001/pyspark_iceberg_table": (
        f"fixtures/duckdb-iceberg/data/iceberg/generated_spec{v}_0_001/expected_results/last"
    )
    for v in (1, 2)
}


# -- locating a fixture table ----------------------------------------------------------------------------


def _rel(rel: str) -> str:
    rel = rel.strip("/")
    return rel if rel.startswith("fixtures/") else "fixtures/" + rel


def _table_dir(rel: str) -> Path:
    path = SHARED / _rel(rel)
    if not (path / "metadata").is_dir():
        raise FileNotFoundError(f"{path}: not an Iceberg table directory (fixtures at {FIXTURES})")
    return path


def _read_json(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":  # gzip-compressed metadata (v2.gz.metadata.json)
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    assert isinstance(data, dict), path
    return data


def _version(name: str) -> int:
    m = re.match(r"^v?(\d+)[.-]", name)
    return int(m.group(1)) if m else -1


def current_metadata_file(rel: str) -> Path:
    """The table's current metadata JSON, chosen by SOURCES.md's rules (written here, not gpu_engine's).

    A ``version-hint.text``/``.txt`` holding N names ``vN[.gz].metadata.json``, one holding a name names that
    file; with no (or an empty) hint the file with the greatest ``last-updated-ms`` wins (ties: highest
    numeric version, so ``v16`` beats ``v9``).
    """
    meta = _table_dir(rel) / "metadata"
    for hint_name in ("version-hint.text", "version-hint.txt"):
        hint_file = meta / hint_name
        if not hint_file.is_file():
            continue
        hint = hint_file.read_text().strip()
        if not hint:
            break
        names = (
            [f"v{hint}.metadata.json", f"v{hint}.gz.metadata.json"]
            if hint.isdigit()
            else [hint, f"{hint}.metadata.json"]
        )
        for name in names:
            if (meta / name).is_file():
                return meta / name
        raise FileNotFoundError(f"{hint_file} names {hint!r}, which is not there")
    candidates = [p for p in meta.iterdir() if p.name.endswith(".metadata.json")]
    if not candidates:
        raise FileNotFoundError(f"{meta}: no metadata JSON")
    return max(candidates, key=lambda p: (int(_read_json(p)["last-updated-ms"]), _version(p.name)))


def metadata_json(rel: str) -> dict[str, Any]:
    """The content of the table's current metadata JSON (gzip-compressed or not), as written."""
    return _read_json(current_metadata_file(rel))


def table_path_map(rel: str) -> PathMap:
    """Recorded path prefixes of ``rel`` -> where the files are now (table location + INVENTORY extras)."""
    rel = _rel(rel)
    location = str(_read_json(current_metadata_file(rel))["location"])
    mapping = {location: str(_table_dir(rel))}
    if location.startswith("./"):  # DuckDB's lineitem tables: location "./t", file paths "t/..."
        mapping[location[2:]] = mapping[location]
    return PathMap.of(mapping).merged(PathMap.of(extra_path_map(rel) if rel in inventory() else {}))


def _local(pm: PathMap, path: str) -> str:
    """The local path of a recorded path (mapped, then scheme and authority stripped)."""
    return normalize(pm.apply(path))


# -- the session's scratch space -------------------------------------------------------------------------

_LOCK = threading.RLock()
_ROOT: list[Path] = []


def _scratch() -> Path:
    with _LOCK:
        if not _ROOT:
            root = Path(tempfile.mkdtemp(prefix="ge-oracles-"))
            atexit.register(shutil.rmtree, root, ignore_errors=True)
            _ROOT.append(root)
        return _ROOT[0]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[-80:] + "-" + hashlib.sha1(text.encode()).hexdigest()[:10]


def _respell_delete_file(src: str, dest: Path, spell: Any) -> tuple[int, int]:
    """Copy the position-delete Parquet file ``src`` to ``dest`` with each ``file_path`` value respelled by
    ``spell`` (str -> str), keeping the schema (field ids, metadata) and every other column as written.
    Returns the new file's size and its number of NULL ``file_path`` values."""
    table = pq.read_table(src)
    idx = table.schema.get_field_index("file_path")
    if idx < 0:
        raise ValueError(f"{src}: position-delete file without a file_path column")
    field = table.schema.field(idx)
    old = table.column(idx).to_pylist()
    new = pa.array([None if v is None else spell(v) for v in old], type=pa.string())
    table = table.set_column(idx, field.with_type(pa.string()), new.cast(field.type))
    dest.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, dest)
    return dest.stat().st_size, new.null_count


# -- PyIceberg -------------------------------------------------------------------------------------------


class _PyIcebergIO(RemappingFileIO):
    """:class:`RemappingFileIO` that also serves respelled copies of position-delete files."""

    def __init__(self, path_map: PathMap) -> None:
        super().__init__(path_map)
        self.substitutes: dict[str, str] = {}  # recorded delete-file path -> local respelled copy

    def new_input(self, location: str) -> PyArrowFile:
        substitute = self.substitutes.get(location)
        if substitute is not None:
            return PyArrowFileIO.new_input(self, substitute)
        return super().new_input(location)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def pyiceberg_rows(rel: str, snapshot_id: int | None = None) -> pa.Table:
    """Rows of ``rel`` (current snapshot, or ``snapshot_id``) as PyIceberg reads them.

    Raises :class:`OracleUnavailable` where PyIceberg cannot read the table (equality deletes, metadata
    it cannot parse, ...); the message names PyIceberg's own error.
    """
    rel = _rel(rel)
    metadata = current_metadata_file(rel)
    pm = table_path_map(rel)
    io = _PyIcebergIO(pm)
    try:
        with _quiet():
            static = StaticTable.from_metadata(str(metadata))
    except Exception as exc:
        raise OracleUnavailable(f"PyIceberg cannot load {metadata.name}: {_first_line(exc)}") from exc
    static.io = io
    try:
        with _quiet():
            scan = static.scan(snapshot_id=snapshot_id)
            tasks = list(scan.plan_files())
    except Exception as exc:
        raise OracleUnavailable(f"PyIceberg cannot plan {rel}: {_first_line(exc)}") from exc
    # position deletes are matched by raw string: respell their file_path as the manifests spell the file
    spelled = {_local(pm, t.file.file_path): t.file.file_path for t in tasks}
    root = _scratch() / "pyiceberg-deletes"
    for task in tasks:
        for delete in task.delete_files:
            if delete.file_format.name != "PARQUET" or delete.file_path in io.substitutes:
                continue
            src = _local(pm, delete.file_path)
            dest = root / (_slug(src) + ".parquet")
            with _LOCK:
                if not dest.exists():
                    _respell_delete_file(src, dest, lambda v: spelled.get(_local(pm, v), v))
            io.substitutes[delete.file_path] = str(dest)
    try:
        with _quiet():
            result = scan.to_arrow()
    except Exception as exc:
        raise OracleUnavailable(f"PyIceberg cannot read {rel}: {_first_line(exc)}") from exc
    assert isinstance(result, pa.Table)
    return result


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[:3]).strip()
    return f"{type(exc).__name__}: {text[:400]}"


# -- DuckDB: a path-remapped copy of the metadata --------------------------------------------------------


def _strip_logical(schema: Any) -> Any:
    """The Avro schema without logicalType annotations (values then read and written as stored)."""
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _strip_logical(v) for k, v in schema.items() if k != "logicalType"}
    return schema


def _rewrite_avro(src: str, dest: Path, edit: Any) -> None:
    """Copy the Avro file ``src`` to ``dest`` with ``edit(record)`` applied to each record (in place).

    The writer schema is kept (logical types included: records are read and written as stored, without
    logical conversions), as are the codec and the file metadata (Iceberg's "schema", "partition-spec",
    "format-version", "content", ...).
    """
    with open(src, "rb") as f:
        meta = dict(fastavro.reader(f).metadata)
    writer_schema = json.loads(meta["avro.schema"])
    codec = meta.get("avro.codec", "null")
    with open(src, "rb") as f:
        records = list(fastavro.reader(f, reader_schema=_strip_logical(writer_schema)))
    for record in records:
        edit(record)
    extra = {k: v for k, v in meta.items() if not k.startswith("avro.")}
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as out:
        fastavro.writer(out, writer_schema, records, codec=codec, metadata=extra)


@dataclass(frozen=True)
class _Copy:
    metadata: Path  # the copied metadata JSON
    md: dict[str, Any]  # its content
    hazards: dict[int, str]  # snapshot id -> why DuckDB must not be run on that snapshot


_COPIES: dict[str, _Copy] = {}
_NULL_PATHS = (
    "a position-delete file holds NULL file_path values (malformed); DuckDB 1.5.5 reads them as garbage "
    "and crashes the process (segfault) nondeterministically, so it is not run on this snapshot"
)


class _Copier:
    """Writes one table's remapped metadata copy under ``base``."""

    def __init__(self, rel: str, base: Path) -> None:
        self.rel = rel
        self.pm = table_path_map(rel)
        self.base = base
        self.manifests: dict[str, tuple[str, str | None]] = {}  # local source -> (copy, hazard)
        self.deletes: dict[str, tuple[str, int, int]] = {}  # local source -> (copy, size, NULL file_paths)
        self.entry_hazard: str | None = None  # of the manifest being rewritten
        self.list_hazard: str | None = None  # of the manifest list being rewritten

    def local(self, path: str) -> str:
        return _local(self.pm, path)

    def delete_copy(self, src: str) -> tuple[str, int, int]:
        if src not in self.deletes:
            dest = self.base / "deletes" / (_slug(src) + ".parquet")
            size, nulls = _respell_delete_file(src, dest, self.local)
            self.deletes[src] = (str(dest), size, nulls)
        return self.deletes[src]

    def edit_entry(self, entry: dict[str, Any]) -> None:
        data_file = entry["data_file"]
        src = self.local(data_file["file_path"])
        is_position_delete = (
            data_file.get("content", 0) == 1 and data_file["file_format"].upper() == "PARQUET"
        )
        if is_position_delete and entry["status"] != 2 and Path(src).is_file():
            path, size, nulls = self.delete_copy(src)
            if nulls:
                self.entry_hazard = _NULL_PATHS
            data_file["file_path"] = path
            data_file["file_size_in_bytes"] = size
            for key in ("lower_bounds", "upper_bounds"):  # bounds of the old file_path spellings
                if data_file.get(key) is not None:
                    data_file[key] = [kv for kv in data_file[key] if kv["key"] != PATH_FIELD_ID]
            if data_file.get("split_offsets") is not None:
                data_file["split_offsets"] = None
        else:
            data_file["file_path"] = src
        if data_file.get("referenced_data_file") is not None:
            data_file["referenced_data_file"] = self.local(data_file["referenced_data_file"])

    def manifest_copy(self, recorded: str) -> str:
        src = self.local(recorded)
        if src not in self.manifests:
            if not Path(src).is_file():
                return src  # a missing manifest stays missing (that snapshot cannot be read)
            dest = self.base / "metadata" / f"{len(self.manifests):04d}-{Path(src).name}"
            self.entry_hazard = None
            _rewrite_avro(src, dest, self.edit_entry)
            self.manifests[src] = (str(dest), self.entry_hazard)
        path, hazard = self.manifests[src]
        self.list_hazard = self.list_hazard or hazard
        return path

    def edit_manifest_file(self, record: dict[str, Any]) -> None:
        record["manifest_path"] = self.manifest_copy(record["manifest_path"])

    def manifest_list_copy(self, recorded: str, index: int) -> str:
        src = self.local(recorded)
        if not Path(src).is_file():
            return src  # missing manifest lists (pg_lake spark_generated_iceberg_test_2) stay missing
        dest = self.base / "metadata" / f"list-{index:03d}-{Path(src).name}"
        _rewrite_avro(src, dest, self.edit_manifest_file)
        return str(dest)

    def take_list_hazard(self) -> str | None:
        hazard, self.list_hazard = self.list_hazard, None
        return hazard

    def run(self) -> _Copy:
        source = current_metadata_file(self.rel)
        md = copy.deepcopy(_read_json(source))
        md["location"] = str(_table_dir(self.rel))
        _add_v1_lists(md)
        for item in md.get("metadata-log") or []:
            item["metadata-file"] = self.local(item["metadata-file"])
        hazards: dict[int, str] = {}
        for i, snap in enumerate(md.get("snapshots") or []):
            if snap.get("manifest-list"):
                snap["manifest-list"] = self.manifest_list_copy(snap["manifest-list"], i)
            if snap.get("manifests"):
                snap["manifests"] = [self.manifest_copy(m) for m in snap["manifests"]]
            hazard = self.take_list_hazard()
            if hazard:
                hazards[int(snap["snapshot-id"])] = hazard
        for key in ("statistics", "partition-statistics"):
            for item in md.get(key) or []:
                item["statistics-path"] = self.local(item["statistics-path"])
        name = source.name.replace(".gz.metadata.json", ".metadata.json")
        dest = self.base / "metadata" / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(md, indent=1))
        return _Copy(dest, md, hazards)


def _add_v1_lists(md: dict[str, Any]) -> None:
    """Give v1 metadata that only has the single ``schema`` / ``partition-spec`` the equivalent
    ``schemas`` + ``current-schema-id`` / ``partition-specs`` + ``default-spec-id`` (the spec makes the
    lists optional in v1 and the single fields their current element): a no-op for the table's meaning,
    needed because DuckDB 1.5.5 does not read the v1 ``schema`` field."""
    if "schemas" not in md and "schema" in md:
        schema = {"schema-id": 0, **md["schema"]}
        md["schemas"] = [schema]
        md["current-schema-id"] = schema["schema-id"]
    if "partition-specs" not in md and "partition-spec" in md:
        fields = [{"field-id": 1000 + i, **f} for i, f in enumerate(md["partition-spec"])]
        md["partition-specs"] = [{"spec-id": 0, "fields": fields}]
        md["default-spec-id"] = 0


def _copy_of(rel: str) -> _Copy:
    rel = _rel(rel)
    with _LOCK:
        if rel not in _COPIES:
            base = _scratch() / "duckdb" / _slug(rel)
            if base.exists():
                shutil.rmtree(base)
            _COPIES[rel] = _Copier(rel, base).run()
        return _COPIES[rel]


def remapped_copy(rel: str) -> Path:
    """The metadata JSON of a path-remapped copy of ``rel``'s metadata (made once per session).

    Metadata JSON (``location``, ``metadata-log``, ``manifest-list``, ``statistics``), manifest lists
    (``manifest_path``) and manifests (``data_file.file_path``, ``referenced_data_file``) are rewritten to
    absolute local paths: data, equality-delete and Puffin files stay in the fixture, Parquet
    position-delete files are copied with their ``file_path`` column remapped (size and the
    ``file_path`` bounds updated in their manifest entries). v1 metadata gains ``schemas``/``partition-specs``
    lists equivalent to its single ``schema``/``partition-spec`` (see :func:`_add_v1_lists`).
    """
    return _copy_of(rel).metadata


_SITE = Path(duckdb.__file__).resolve().parent.parent
_DUCKDB: list[duckdb.DuckDBPyConnection] = []


def _duckdb() -> duckdb.DuckDBPyConnection:
    with _LOCK:
        if not _DUCKDB:
            con = duckdb.connect(
                config={
                    "allow_unsigned_extensions": "true",
                    "autoinstall_known_extensions": "false",
                    "autoload_known_extensions": "false",
                }
            )
            version = "v" + duckdb.__version__
            for ext in ("avro", "iceberg"):  # avro first: iceberg reads manifests through it
                path = _SITE / f"duckdb_extension_{ext}" / "extensions" / version / f"{ext}.duckdb_extension"
                con.execute(f"LOAD '{path}'")
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET arrow_lossless_conversion = true")  # uuid as arrow.uuid, not text
            _DUCKDB.append(con)
        return _DUCKDB[0]


def _schema_names(md: dict[str, Any], snapshot_id: int | None) -> list[str]:
    """Top-level column names of the schema a read of ``snapshot_id`` (None: current) uses."""
    schema_id = md.get("current-schema-id")
    for snap in md.get("snapshots") or []:
        if snapshot_id is not None and snap["snapshot-id"] == snapshot_id and "schema-id" in snap:
            schema_id = snap["schema-id"]
    schemas = md.get("schemas") or [md["schema"]]
    schema = next((s for s in schemas if s.get("schema-id") == schema_id), schemas[-1])
    return [str(f["name"]) for f in schema["fields"]]


def _without_bool8(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.bool8":
        return pa.bool_()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_without_bool8(f.type)) for f in t])
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        return pa.map_(key.with_type(_without_bool8(key.type)), item.with_type(_without_bool8(item.type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_without_bool8(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_without_bool8(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_without_bool8(t.value_type)), t.list_size)
    return t


def duckdb_rows(rel: str, snapshot_id: int | None = None) -> pa.Table:
    """Rows of ``rel`` (current snapshot, or ``snapshot_id``) as DuckDB's iceberg extension reads them.

    DuckDB exports with ``arrow_lossless_conversion`` (so uuids are ``arrow.uuid``, not text); the
    ``arrow.bool8`` extension that mode gives booleans is cast back to plain ``bool`` (nested too).
    DuckDB's column names are case-insensitive: it renames a column whose name differs from an earlier
    one only in case (``uSeR_Id`` after ``user_id`` becomes ``uSeR_Id_1``). Columns come in schema order,
    so such renamed columns get their Iceberg names back.
    """
    cp = _copy_of(rel)
    target = snapshot_id if snapshot_id is not None else cp.md.get("current-snapshot-id")
    if target is not None and int(target) in cp.hazards:
        raise OracleUnavailable(f"DuckDB not run on {_rel(rel)}: {cp.hazards[int(target)]}")
    sql = "SELECT * FROM iceberg_scan(?" + ("" if snapshot_id is None else ", snapshot_from_id => ?") + ")"
    params: list[Any] = [str(cp.metadata)] + ([] if snapshot_id is None else [snapshot_id])
    with _LOCK:
        try:
            result = _duckdb().execute(sql, params).to_arrow_table()
        except duckdb.Error as exc:
            raise OracleUnavailable(f"DuckDB cannot read {_rel(rel)}: {_first_line(exc)}") from exc
    assert isinstance(result, pa.Table)
    plain = pa.schema([f.with_type(_without_bool8(f.type)) for f in result.schema])
    if plain != result.schema:
        result = result.cast(plain)
    names = _schema_names(cp.md, snapshot_id)
    got = result.column_names
    if (
        got != names
        and len(got) == len(names)
        and all(g == n or g.lower().startswith(n.lower() + "_") for g, n in zip(got, names, strict=True))
    ):
        result = result.rename_columns(names)
    return result


# -- results the fixtures ship ---------------------------------------------------------------------------


HAND_CHECKED = frozenset(_SPEC_DERIVED) | frozenset(_DIRECT_FILES)


def expected_rows(rel: str) -> pa.Table | None:
    """The table's contents at its current snapshot as shipped by the fixture (or derived by hand from
    the spec where no trusted oracle reads it), or None."""
    if _rel(rel) in _SPEC_DERIVED:
        return pa.Table.from_pylist(_SPEC_DERIVED[_rel(rel)])
    if _rel(rel) in _DIRECT_FILES:
        files = sorted(_table_dir(rel).glob(_DIRECT_FILES[_rel(rel)]))
        assert files, f"{rel}: no data file matches {_DIRECT_FILES[_rel(rel)]}"
        return pa.concat_tables([pq.read_table(f) for f in files])
    results = _EXPECTED_RESULTS.get(_rel(rel))
    if results is None:
        return None
    files = sorted((SHARED / results / "data").glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


def expected_row_count(rel: str) -> int | None:
    """The table's row count at its current snapshot as the fixture documents it, or None."""
    rel = _rel(rel)
    if rel in _DOCUMENTED_COUNTS:
        return _DOCUMENTED_COUNTS[rel]
    results = _EXPECTED_RESULTS.get(rel)
    if results is None:
        return None
    lines = (SHARED / results / "count.csv").read_text().split()
    assert lines[0] == "count", lines
    return int(lines[1])


# -- multiset comparison ---------------------------------------------------------------------------------
#
# Each value becomes a (kind, payload) pair; rows are compared as multisets of tuples ordered by column
# name. Representation differences that are not value differences are normalised away:
# - string / large_string / string_view are "str"; binary / large_binary / binary_view / fixed_size_binary
#   are "bytes" (DuckDB reads Iceberg fixed(L) as BLOB);
# - all integer widths are "int" (int -> long promotion; DuckDB's unsigned/int widths);
# - float32 and float64 are "float", compared exactly by IEEE-754 bits of the value as a double (float32
#   widens exactly), so -0.0 and 0.0 DIFFER (a reader must not change a stored sign); every NaN is one value;
# - decimals compare by numeric value, whatever their precision (decimal width) or the scale spelled;
# - timestamps compare as (with-time-zone?, nanoseconds since the epoch): unit (s/ms/us/ns) and the zone
#   name ("UTC", "+00:00", "Etc/UTC", any zone: Arrow stores UTC instants) are representation;
#   timestamp vs timestamptz is a difference; date32/date64 are days; time32/time64 are nanoseconds;
# - UUIDs are 16 bytes of kind "bytes" (as fixed[16]) whether arrow.uuid extension, or (paired with a
#   uuid column) text
#   or fixed_size_binary(16); Python uuid.UUID objects in object columns likewise;
# - list / large_list / fixed_size_list / list_view are "list"; maps compare as multisets of entries
#   (entry order is not a value); struct fields compare by name (field order ignored, like columns);
# - booleans are "bool", also as the arrow.bool8 extension (int8 storage, DuckDB's lossless export);
# - dictionary-encoded arrays compare by their decoded values; other extension types by their storage.
# The uuid pairing is top-level only: a uuid nested in a struct/list must be uuid-typed on both sides
# (duckdb_rows exports arrow.uuid, as PyIceberg does).
# Column names must match exactly (case included); nullability and field metadata are ignored.

_NAN = ("float", "nan")
_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _float(v: float) -> tuple[str, Any]:
    return _NAN if math.isnan(v) else ("float", struct.pack(">d", v))


def _is_uuid_type(t: pa.DataType) -> bool:
    return bool(
        (isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.uuid")
        or (pa.types.is_fixed_size_binary(t) and t.byte_width == 16)
    )


def _canon(arr: pa.Array) -> list[Any]:
    """Canonical (kind, payload) values of ``arr``, None for nulls."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        storage = arr.storage
        if t.extension_name == "arrow.uuid":
            return [None if v is None else ("bytes", v) for v in storage.to_pylist()]
        if t.extension_name == "arrow.bool8":  # DuckDB's lossless boolean export: int8 storage
            return [None if v is None else ("bool", v != 0) for v in storage.to_pylist()]
        return _canon(storage)
    if pa.types.is_dictionary(t):
        return _canon(arr.dictionary_decode())
    if pa.types.is_null(t):
        return [None] * len(arr)
    if pa.types.is_boolean(t):
        return [None if v is None else ("bool", v) for v in arr.to_pylist()]
    if pa.types.is_integer(t):
        return [None if v is None else ("int", v) for v in arr.to_pylist()]
    if pa.types.is_floating(t):
        return [None if v is None else _float(float(v)) for v in arr.to_pylist()]
    if pa.types.is_decimal(t):
        return [None if v is None else ("decimal", v) for v in arr.to_pylist()]
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return [None if v is None else ("str", v) for v in arr.to_pylist()]
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return [None if v is None else ("bytes", v) for v in arr.to_pylist()]
    if pa.types.is_timestamp(t):
        kind = "ts" if t.tz is None else "tstz"
        scale = _UNIT_NS[t.unit]
        return [None if v is None else (kind, v * scale) for v in arr.cast(pa.int64()).to_pylist()]
    if pa.types.is_date32(t):
        return [None if v is None else ("date", v) for v in arr.cast(pa.int32()).to_pylist()]
    if pa.types.is_date64(t):
        return [None if v is None else ("date", v // 86_400_000) for v in arr.cast(pa.int64()).to_pylist()]
    if pa.types.is_time(t):
        scale = _UNIT_NS[t.unit]
        width = pa.int32() if pa.types.is_time32(t) else pa.int64()
        return [None if v is None else ("time", v * scale) for v in arr.cast(width).to_pylist()]
    if pa.types.is_duration(t):
        scale = _UNIT_NS[t.unit]
        return [None if v is None else ("duration", v * scale) for v in arr.cast(pa.int64()).to_pylist()]
    if pa.types.is_struct(t):
        valid = arr.is_valid().to_pylist()
        names = [t.field(i).name for i in range(t.num_fields)]
        children = [_canon(c) for c in arr.flatten()]
        order = sorted(range(len(names)), key=lambda i: names[i])
        return [
            ("struct", tuple((names[i], children[i][row]) for i in order)) if valid[row] else None
            for row in range(len(arr))
        ]
    if pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        offsets = arr.offsets.to_pylist()
        children = arr.values.slice(offsets[0], offsets[-1] - offsets[0])
        if pa.types.is_map(t):  # entries: struct<key, value>
            keys, values = (_canon(c) for c in children.flatten())
            flat: list[Any] = list(zip(keys, values, strict=True))
        else:
            flat = _canon(children)
        return _split(arr, flat, offsets, ordered=not pa.types.is_map(t))
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        offsets = [i * size for i in range(len(arr) + 1)]
        return _split(
            arr, _canon(arr.values.slice(arr.offset * size, len(arr) * size)), offsets, ordered=True
        )
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return _canon(arr.cast(pa.large_list(t.value_type)))
    # anything else (object-like): Python values, UUID objects as uuid bytes
    return [_canon_py(v) for v in arr.to_pylist()]


def _canon_py(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, uuid.UUID):  # nested uuids: DuckDB gives UUID objects, Arrow readers 16 bytes
        return ("bytes", v.bytes)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, Decimal):
        return ("decimal", v)
    return (type(v).__name__, v)


def _split(arr: pa.Array, flat: list[Any], offsets: list[int], *, ordered: bool) -> list[Any]:
    """Regroup the canonical child values of a list-like ``arr`` (``offsets`` into them) per row."""
    valid = arr.is_valid().to_pylist()
    base = offsets[0]
    out: list[Any] = []
    for row in range(len(arr)):
        if not valid[row]:
            out.append(None)
            continue
        items = flat[offsets[row] - base : offsets[row + 1] - base]
        out.append(("list", tuple(items)) if ordered else ("map", tuple(sorted(items, key=repr))))
    return out


def _as_uuid_text(col: pa.ChunkedArray) -> list[Any] | None:
    """Canonical uuid values of a text column holding UUIDs (DuckDB's default uuid export), else None."""
    out: list[Any] = []
    for v in col.to_pylist():
        if v is None:
            out.append(None)
            continue
        try:
            out.append(("bytes", uuid.UUID(v).bytes))
        except ValueError:
            return None
    return out


def _column(table: pa.Table, name: str, other: pa.Table) -> list[Any]:
    col = table.column(name)
    mine, theirs = col.type, other.column(name).type
    if (pa.types.is_string(mine) or pa.types.is_large_string(mine)) and _is_uuid_type(theirs):
        as_uuid = _as_uuid_text(col)
        if as_uuid is not None:
            return as_uuid
    if _is_uuid_type(mine) and (_is_uuid_type(theirs) or pa.types.is_string(theirs)) and mine != theirs:
        storage = col.combine_chunks()
        if isinstance(mine, pa.BaseExtensionType):
            storage = storage.storage
        return [None if v is None else ("bytes", v) for v in storage.to_pylist()]
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return _canon(arr)


def _rows(table: pa.Table, names: list[str], other: pa.Table) -> list[tuple[Any, ...]]:
    columns = [_column(table, n, other) for n in names]
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(table.num_rows)]


def _show(table: pa.Table, rows: list[tuple[Any, ...]], wanted: Counter[tuple[Any, ...]], limit: int) -> str:
    lines = []
    for i, row in enumerate(rows):
        if wanted.get(row, 0) > 0:
            lines.append(f"    x{wanted[row]} {table.slice(i, 1).to_pylist()[0]}")
            del wanted[row]
            if len(lines) >= limit:
                break
    return "\n".join(lines)


def assert_same_rows(actual: pa.Table, expected: pa.Table, *, context: str, show: int = 5) -> None:
    """Assert ``actual`` and ``expected`` hold the same multiset of rows (see the normalisations above)."""
    a_names, e_names = set(actual.column_names), set(expected.column_names)
    if a_names != e_names or len(a_names) != actual.num_columns or len(e_names) != expected.num_columns:
        raise AssertionError(
            f"{context}: columns differ: only in actual {sorted(a_names - e_names)}, "
            f"only in expected {sorted(e_names - a_names)} "
            f"(actual {actual.column_names}, expected {expected.column_names})"
        )
    names = sorted(a_names)
    a_rows, e_rows = _rows(actual, names, expected), _rows(expected, names, actual)
    a_count, e_count = Counter(a_rows), Counter(e_rows)
    if a_count == e_count:
        return
    only_a, only_e = a_count - e_count, e_count - a_count
    raise AssertionError(
        f"{context}: rows differ: actual {actual.num_rows} rows, expected {expected.num_rows}; "
        f"{only_a.total()} rows only in actual, {only_e.total()} only in expected\n"
        f"  only in actual (first {show}):\n{_show(actual, a_rows, only_a, show)}\n"
        f"  only in expected (first {show}):\n{_show(expected, e_rows, only_e, show)}"
    )
