"""A large synthetic Iceberg table for the planning benchmark, written by PyIceberg (the independent writer).

The table (format v2, SQL catalog on SQLite) has schema ``id long, ts timestamp, value double, name string,
category string`` partitioned by ``day(ts)`` and one append snapshot whose manifest list names ``manifests``
manifests of ``files / manifests`` data files each. The data files do not exist: planning never opens them.

Every data file carries realistic metrics for all five columns (sizes, value/null counts, NaN counts for
``value``, lower/upper bounds) and split offsets. File ``k`` holds ids ``[k * ID_STRIDE, k * ID_STRIDE +
record_count)`` and rows of one day, drawn uniformly from ``DAYS`` days starting at ``FIRST_DAY``; files are
shuffled across manifests, so every manifest spans the whole year and manifest pruning cannot help: per-file
partition pruning (for a ``ts`` filter) and metrics pruning (for an ``id`` filter) do the work.

Manifests are written with ``pyiceberg.manifest.write_manifest`` (PyIceberg writes one Avro block per
entry), the manifest list with ``write_manifest_list``, and the snapshot is committed through the catalog
(``commit_table`` with ``AddSnapshotUpdate`` + ``SetSnapshotRefUpdate``), so PyIceberg writes the metadata
file and swaps the catalog pointer itself.

The table is generated once into a cache directory and reused while ``generated.json`` there matches the
parameters.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GENERATOR_VERSION = 1
MARKER = "generated.json"
NAMESPACE = "db"
TABLE = "t"
IDENTIFIER = f"{NAMESPACE}.{TABLE}"
CATALOG_NAME = "bench"
DAYS = 365
FIRST_DAY = dt.date(2024, 1, 1)
ID_STRIDE = 1_000_000  # > the largest record_count, so files' id ranges never overlap
ROW_GROUP_BYTES = 128 * 1024 * 1024
CATEGORIES = ("books", "clothing", "electronics", "garden", "grocery", "health", "music", "sports", "toys")
DEFAULT_SEED = 20_240_101
MICROS_PER_DAY = 86_400_000_000


@dataclass(frozen=True)
class GeneratedTable:
    """What the benchmark needs to know about a generated table (``generated.json`` in the cache dir)."""

    generator_version: int
    files: int
    manifests: int
    seed: int
    cache_dir: str
    catalog_uri: str
    warehouse: str
    identifier: str
    metadata_location: str
    snapshot_id: int
    files_per_day: list[int]  # index: days since FIRST_DAY
    id_stride: int
    manifest_bytes: int
    manifest_list_bytes: int
    generate_s: float

    def day(self, index: int) -> dt.date:
        return FIRST_DAY + dt.timedelta(days=index)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def catalog_properties(cache_dir: Path) -> dict[str, str]:
    """The SQL catalog (SQLite file) and warehouse of a cache dir; the same keys PyIceberg and we read."""
    return {"uri": f"sqlite:///{cache_dir / 'catalog.db'}", "warehouse": (cache_dir / "warehouse").as_uri()}


def load_generated(cache_dir: Path, files: int, manifests: int, seed: int) -> GeneratedTable | None:
    """The table generated in ``cache_dir`` with these parameters, or None (absent, partial or different)."""
    try:
        raw = json.loads((cache_dir / MARKER).read_text())
        found = GeneratedTable(**raw)
    except (OSError, ValueError, TypeError):
        return None
    wanted = (GENERATOR_VERSION, files, manifests, seed)
    if (found.generator_version, found.files, found.manifests, found.seed) != wanted:
        return None
    if not Path(found.metadata_location.removeprefix("file://")).exists():
        return None
    return found


def ensure_table(
    cache_dir: Path, files: int, manifests: int, *, seed: int = DEFAULT_SEED, regenerate: bool = False
) -> tuple[GeneratedTable, bool]:
    """The cached table, generating it first if needed; also whether it was generated now."""
    if not regenerate:
        found = load_generated(cache_dir, files, manifests, seed)
        if found is not None:
            return found, False
    if cache_dir.exists() and any(cache_dir.iterdir()):
        ours = (cache_dir / MARKER).exists() or (cache_dir / "catalog.db").exists()
        if not ours:
            raise SystemExit(f"{cache_dir} is not empty and holds no generated table: refusing to delete it")
        shutil.rmtree(cache_dir)
    return generate(cache_dir, files, manifests, seed=seed), True


def generate(cache_dir: Path, files: int, manifests: int, *, seed: int = DEFAULT_SEED) -> GeneratedTable:
    if files < manifests or manifests < 1:
        raise SystemExit(f"need files >= manifests >= 1 (got files={files}, manifests={manifests})")
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.manifest import write_manifest, write_manifest_list
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

    start = time.perf_counter()
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "warehouse").mkdir(exist_ok=True)
    props = catalog_properties(cache_dir)
    catalog = SqlCatalog(CATALOG_NAME, **props)
    catalog.create_namespace(NAMESPACE)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, "value", DoubleType(), required=False),
        NestedField(4, "name", StringType(), required=False),
        NestedField(5, "category", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    table = catalog.create_table(
        IDENTIFIER, schema=schema, partition_spec=spec, properties={"format-version": "2"}
    )
    if table.format_version != 2:
        raise SystemExit(f"PyIceberg created a v{table.format_version} table, expected v2")
    schema, spec = table.schema(), table.spec()  # as PyIceberg assigned them (fresh ids)

    rng = random.Random(seed)
    snapshot_id = rng.randrange(1, 2**62)
    days = [rng.randrange(DAYS) for _ in range(files)]
    order = list(range(files))
    rng.shuffle(order)  # files of random days in every manifest: no clustering by manifest
    bounds = [files * m // manifests for m in range(manifests + 1)]

    metadata_dir = f"{table.location().rstrip('/')}/metadata"
    commit_uuid = uuid.UUID(int=rng.getrandbits(128), version=4)
    manifest_files = []
    total_rows = total_bytes = manifest_bytes = 0
    for m in range(manifests):
        out = table.io.new_output(f"{metadata_dir}/{commit_uuid}-m{m}.avro")
        with write_manifest(
            format_version=2,
            spec=spec,
            schema=schema,
            output_file=out,
            snapshot_id=snapshot_id,
            avro_compression="deflate",
        ) as writer:
            for k in order[bounds[m] : bounds[m + 1]]:
                entry = _entry(rng, table.location(), k, days[k], snapshot_id, spec.spec_id)
                total_rows += entry.data_file.record_count
                total_bytes += entry.data_file.file_size_in_bytes
                writer.add_entry(entry)
        manifest = writer.to_manifest_file()
        manifest_bytes += manifest.manifest_length
        manifest_files.append(manifest)

    list_path = f"{metadata_dir}/snap-{snapshot_id}-1-{commit_uuid}.avro"
    list_out = table.io.new_output(list_path)
    with write_manifest_list(
        format_version=2,
        output_file=list_out,
        snapshot_id=snapshot_id,
        parent_snapshot_id=None,
        sequence_number=1,
        avro_compression="deflate",
    ) as list_writer:
        list_writer.add_manifests(manifest_files)
    list_bytes = len(table.io.new_input(list_path))

    summary = Summary(
        Operation.APPEND,
        **{
            "added-data-files": str(files),
            "added-records": str(total_rows),
            "added-files-size": str(total_bytes),
            "changed-partition-count": str(len(set(days))),
            "total-data-files": str(files),
            "total-records": str(total_rows),
            "total-files-size": str(total_bytes),
            "total-delete-files": "0",
            "total-position-deletes": "0",
            "total-equality-deletes": "0",
        },
    )
    snapshot = Snapshot.model_validate(
        {
            "snapshot-id": snapshot_id,
            "sequence-number": 1,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": list_path,
            "summary": summary,
            "schema-id": schema.schema_id,
        }
    )
    catalog.commit_table(
        table,
        requirements=(AssertRefSnapshotId.model_validate({"ref": "main", "snapshot-id": None}),),
        updates=(
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate.model_validate(
                {"ref-name": "main", "type": SnapshotRefType.BRANCH, "snapshot-id": snapshot_id}
            ),
        ),
    )
    table = catalog.load_table(IDENTIFIER)
    current = table.current_snapshot()
    if current is None or current.snapshot_id != snapshot_id:
        raise SystemExit("the generated snapshot is not the table's current snapshot after the commit")

    per_day = [0] * DAYS
    for d in days:
        per_day[d] += 1
    generated = GeneratedTable(
        generator_version=GENERATOR_VERSION,
        files=files,
        manifests=manifests,
        seed=seed,
        cache_dir=str(cache_dir),
        catalog_uri=props["uri"],
        warehouse=props["warehouse"],
        identifier=IDENTIFIER,
        metadata_location=table.metadata_location,
        snapshot_id=snapshot_id,
        files_per_day=per_day,
        id_stride=ID_STRIDE,
        manifest_bytes=manifest_bytes,
        manifest_list_bytes=list_bytes,
        generate_s=round(time.perf_counter() - start, 3),
    )
    (cache_dir / MARKER).write_text(json.dumps(generated.to_json(), indent=2) + "\n")  # last: marks complete
    return generated


def _entry(rng: random.Random, location: str, k: int, day: int, snapshot_id: int, spec_id: int) -> Any:
    """The ADDED manifest entry of data file ``k`` (rows of day ``day``), with metrics for all columns."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
    from pyiceberg.typedef import Record
    from pyiceberg.types import DoubleType, LongType, StringType, TimestampType

    rows = rng.randrange(20_000, 900_000)
    size = rows * rng.randrange(24, 40)  # bytes per row after encoding and compression
    shares = [rng.uniform(0.1, 0.3) for _ in range(5)]
    col_sizes = {c + 1: max(1, int(size * s / sum(shares))) for c, s in enumerate(shares)}
    value_nulls = rng.randrange(0, rows // 50)
    name_nulls = rng.randrange(0, rows // 100)

    id_lo = k * ID_STRIDE
    day_start = (FIRST_DAY - dt.date(1970, 1, 1)).days * MICROS_PER_DAY + day * MICROS_PER_DAY
    ts_lo = day_start + rng.randrange(0, MICROS_PER_DAY // 4)
    ts_hi = day_start + MICROS_PER_DAY - 1 - rng.randrange(0, MICROS_PER_DAY // 4)
    names = sorted(f"user-{rng.randrange(10**8):08d}" for _ in range(2))
    cats = sorted(rng.sample(CATEGORIES, 2))
    lower = {
        1: to_bytes(LongType(), id_lo),
        2: to_bytes(TimestampType(), ts_lo),
        3: to_bytes(DoubleType(), round(rng.uniform(-1000.0, 0.0), 3)),
        4: to_bytes(StringType(), names[0]),
        5: to_bytes(StringType(), cats[0]),
    }
    upper = {
        1: to_bytes(LongType(), id_lo + rows - 1),
        2: to_bytes(TimestampType(), ts_hi),
        3: to_bytes(DoubleType(), round(rng.uniform(0.0, 1000.0), 3)),
        4: to_bytes(StringType(), names[1]),
        5: to_bytes(StringType(), cats[1]),
    }
    data_file = DataFile.from_args(
        _table_format_version=2,
        content=DataFileContent.DATA,
        file_path=f"{location.rstrip('/')}/data/ts_day={FIRST_DAY + dt.timedelta(days=day)}/"
        f"{k:06d}-{uuid.UUID(int=rng.getrandbits(128), version=4)}.parquet",
        file_format=FileFormat.PARQUET,
        partition=Record(day + (FIRST_DAY - dt.date(1970, 1, 1)).days),
        record_count=rows,
        file_size_in_bytes=size,
        column_sizes=col_sizes,
        value_counts={c: rows for c in range(1, 6)},
        null_value_counts={1: 0, 2: 0, 3: value_nulls, 4: name_nulls, 5: 0},
        nan_value_counts={3: rng.randrange(0, 3)},
        lower_bounds=lower,
        upper_bounds=upper,
        key_metadata=None,
        split_offsets=list(range(4, size, ROW_GROUP_BYTES)),
        equality_ids=None,
        sort_order_id=0,
    )
    data_file.spec_id = spec_id
    return ManifestEntry.from_args(
        _table_format_version=2,
        status=ManifestEntryStatus.ADDED,
        snapshot_id=snapshot_id,
        sequence_number=None,
        file_sequence_number=None,
        data_file=data_file,
    )
