"""Manifest decoding: entries/s of each way to read Iceberg manifests into memory.

    python bench/manifests.py [--entries N] [--columns C] [--codec deflate] [--repeat K] [--out bench/results]

One generated v2 data manifest (written with fastavro, the schema Iceberg Java writes: ``array<record k_v>``
stats maps; ``--entries`` entries, stats for ``--columns`` columns, a day + bucket partition) read by:
our fastavro path (``read_manifest(decoder="fastavro")``), our columnar decoder (``decoder="fast"``) with
every column, with only the lower/upper bounds of one field id, and with no stats maps, the decoder alone
(container + interpreter, no inheritance), and PyIceberg's ``ManifestFile.fetch_manifest_entry``; then
``--small`` manifests of ``--entries // --small`` entries each, through ``read_manifests`` (its default
thread pool, and one worker) against PyIceberg fetching them one after another. The fast decoder's tables
are checked equal to the fastavro path's. Writes ``manifests-cpu.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import _report as rep  # noqa: E402

from gpu_engine.iceberg import avro_fast, manifests  # noqa: E402
from gpu_engine.iceberg.manifest_list import ManifestFile, open_local  # noqa: E402

SEED = 20_261_122
PEER_PACKAGES = ("fastavro", "pyiceberg", "zstandard")
FILTER_FIELD_ID = 5
BOUNDS_ONLY: dict[str, Any] = {
    "stats_columns": {FILTER_FIELD_ID},
    "columns": ("lower_bounds", "upper_bounds"),
}


def _kv(name: str, key_id: int, value_id: int, value: str, field_id: int) -> dict[str, Any]:
    record = {
        "type": "record",
        "name": f"k{key_id}_v{value_id}",
        "fields": [
            {"name": "key", "type": "int", "field-id": key_id},
            {"name": "value", "type": value, "field-id": value_id},
        ],
    }
    array = {"type": "array", "logicalType": "map", "items": record}
    return {"name": name, "type": ["null", array], "default": None, "field-id": field_id}


def _opt(name: str, avro: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro], "default": None, "field-id": field_id}


def manifest_schema() -> dict[str, Any]:
    """The v2 ``manifest_entry`` schema as Iceberg Java writes it (spec "Manifests")."""
    partition = {
        "type": "record",
        "name": "r102",
        "fields": [
            _opt("ts_day", {"type": "int", "logicalType": "date"}, 1000),
            _opt("id_bucket", "int", 1001),
        ],
    }
    data_file = {
        "type": "record",
        "name": "r2",
        "fields": [
            {"name": "content", "type": "int", "field-id": 134},
            {"name": "file_path", "type": "string", "field-id": 100},
            {"name": "file_format", "type": "string", "field-id": 101},
            {"name": "partition", "type": partition, "field-id": 102},
            {"name": "record_count", "type": "long", "field-id": 103},
            {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
            _kv("column_sizes", 117, 118, "long", 108),
            _kv("value_counts", 119, 120, "long", 109),
            _kv("null_value_counts", 121, 122, "long", 110),
            _kv("nan_value_counts", 138, 139, "long", 137),
            _kv("lower_bounds", 126, 127, "bytes", 125),
            _kv("upper_bounds", 129, 130, "bytes", 128),
            _opt("key_metadata", "bytes", 131),
            _opt("split_offsets", {"type": "array", "items": "long", "element-id": 133}, 132),
            _opt("equality_ids", {"type": "array", "items": "int", "element-id": 136}, 135),
            _opt("sort_order_id", "int", 140),
        ],
    }
    return {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            _opt("snapshot_id", "long", 1),
            _opt("sequence_number", "long", 3),
            _opt("file_sequence_number", "long", 4),
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }


def table_metadata(columns: int) -> dict[str, str]:
    fields = [{"id": 1, "name": "id", "required": True, "type": "long"}]
    fields.append({"id": 2, "name": "ts", "required": False, "type": "timestamp"})
    fields += [{"id": i, "name": f"c{i}", "required": False, "type": "long"} for i in range(3, columns + 1)]
    spec = [
        {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1000},
        {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001},
    ]
    return {
        "schema": json.dumps({"type": "struct", "schema-id": 0, "fields": fields}),
        "schema-id": "0",
        "partition-spec": json.dumps(spec),
        "partition-spec-id": "0",
        "format-version": "2",
        "content": "data",
    }


def entries(n: int, columns: int, rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        ids = range(1, columns + 1)
        counts = [{"key": c, "value": rng.randrange(1, 1_000_000)} for c in ids]
        lower = [{"key": c, "value": rng.randbytes(8)} for c in ids]
        upper = [{"key": c, "value": rng.randbytes(8)} for c in ids]
        day = 19_700 + i % 365
        name = f"{i:08d}-{rng.randbytes(8).hex()}.parquet"
        path = f"s3://bucket/warehouse/db/events/data/ts_day={day}/id_bucket={i % 16}/{name}"
        data_file = {
            "content": 0,
            "file_path": path,
            "file_format": "PARQUET",
            "partition": {"ts_day": day, "id_bucket": i % 16},
            "record_count": rng.randrange(1, 10_000_000),
            "file_size_in_bytes": rng.randrange(1, 1 << 30),
            "column_sizes": counts,
            "value_counts": counts,
            "null_value_counts": [{"key": c, "value": rng.randrange(0, 100)} for c in ids],
            "nan_value_counts": [{"key": c, "value": 0} for c in ids[:2]],
            "lower_bounds": lower,
            "upper_bounds": upper,
            "key_metadata": None,
            "split_offsets": [4],
            "equality_ids": None,
            "sort_order_id": 0,
        }
        out.append({"status": 1, "snapshot_id": None, "sequence_number": None,
                    "file_sequence_number": None, "data_file": data_file})  # fmt: skip
    return out


def write_manifest(path: Path, records: list[dict[str, Any]], columns: int, codec: str) -> ManifestFile:
    with open(path, "wb") as f:
        fastavro.writer(f, manifest_schema(), records, metadata=table_metadata(columns), codec=codec)
    n = len(records)
    return ManifestFile(str(path), path.stat().st_size, 0, sequence_number=1, added_snapshot_id=7,
                        added_files_count=n, existing_files_count=0, deleted_files_count=0)  # fmt: skip


def pyiceberg_reader(m: ManifestFile) -> Callable[[], object]:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import ManifestContent
    from pyiceberg.manifest import ManifestFile as PyiManifestFile

    fileio = PyArrowFileIO()
    pm = PyiManifestFile.from_args(
        manifest_path=m.manifest_path, manifest_length=m.manifest_length, partition_spec_id=0,
        content=ManifestContent.DATA, sequence_number=1, min_sequence_number=1, added_snapshot_id=7,
        added_files_count=m.added_files_count, existing_files_count=0, deleted_files_count=0,
    )  # fmt: skip
    return lambda: pm.fetch_manifest_entry(fileio, discard_deleted=False)


def _record(name: str, timing: rep.Timing, n: int, warm_s: float | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "case": name,
        "entries": n,
        "entries_s_best": timing.rate(n),
        "entries_s_median": n / timing.median_s,
    }
    rec["warmup_s"] = warm_s
    rec.update(timing.to_json())
    return rec


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(SEED)
    tmp = Path(tempfile.mkdtemp(prefix="bench-manifests-"))
    records = entries(args.entries, args.columns, rng)
    m = write_manifest(tmp / "big.avro", records, args.columns, args.codec)
    n = len(records)
    read = manifests.read_manifest
    cases: list[tuple[str, Callable[[], object]]] = [
        ("fastavro path: read_manifest(decoder='fastavro')", lambda: read(m, decoder="fastavro")),
        ("fast path, all columns: read_manifest(decoder='fast')", lambda: read(m, decoder="fast")),
        (
            f"fast path, bounds of field {FILTER_FIELD_ID} only",
            lambda: read(m, decoder="fast", **BOUNDS_ONLY),
        ),
        ("fast path, no stats maps", lambda: read(m, decoder="fast", columns=())),
        ("fast decoder alone (container + interpreter)", lambda: _decode_only(m)),
        ("PyIceberg ManifestFile.fetch_manifest_entry", pyiceberg_reader(m)),
    ]
    expected = manifests.read_manifest(m, decoder="fastavro")
    fast = manifests.read_manifest(m, decoder="fast")
    equal = fast.equals(expected) and _filtered_equal(m)
    out = []
    for name, fn in cases:
        warm_s, _ = rep.once(fn)
        timing, _ = rep.measure(fn, args.repeat)
        out.append(_record(name, timing, n, warm_s))
        print(
            f"{name:<66} {out[-1]['entries_s_best']:>10,.0f} entries/s  (best {timing.best_s:.4f} s)",
            flush=True,
        )
    many = _many_small(tmp, records, args, out)
    for r in out:  # against PyIceberg on the same files: the big manifest, or the small ones
        group = r["case"].split(":")[0] if r["case"].startswith(f"{args.small} manifests:") else None
        peer = next(p for p in out if "PyIceberg" in p["case"] and (p["case"].split(":")[0] == group or
                    (group is None and p["case"].startswith("PyIceberg"))))  # fmt: skip
        r["vs_pyiceberg"] = r["entries_s_best"] / peer["entries_s_best"]
    return {"manifest": {"entries": n, "stats_columns": args.columns, "codec": args.codec,
                         "bytes": m.manifest_length}, "cases": out, "small_manifests": many,
            "fast_equals_fastavro": equal}  # fmt: skip


def _decode_only(m: ManifestFile) -> pa.StructArray:
    container = avro_fast.read_container(m.manifest_path, open_local)
    layout = manifests._layout(container.avro, 0)
    return avro_fast.decode(container, avro_fast.program_for(container.avro, layout.entry_struct))


def _filtered_equal(m: ManifestFile) -> bool:
    a = manifests.read_manifest(m, decoder="fast", **BOUNDS_ONLY)
    b = manifests.read_manifest(m, decoder="fastavro", **BOUNDS_ONLY)
    return bool(a.equals(b))


def _many_small(tmp: Path, records: list[dict[str, Any]], args: argparse.Namespace, out: list[Any]) -> Any:
    per = max(1, len(records) // args.small)
    chunks = [records[i * per : (i + 1) * per] for i in range(args.small)]
    files = [
        write_manifest(tmp / f"small{i}.avro", c, args.columns, args.codec) for i, c in enumerate(chunks)
    ]
    n = per * args.small
    peers = [pyiceberg_reader(f) for f in files]
    read, k = manifests.read_manifests, f"{args.small} manifests:"
    pool = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's default
    cases: list[tuple[str, Callable[[], object]]] = [
        (f"{k} read_manifests (fast, default pool: {pool} threads)", lambda: read(files)),
        (f"{k} read_manifests (fast, 1 worker)", lambda: read(files, max_workers=1)),
        (
            f"{k} read_manifests (fast, 1 worker, bounds of 1 field)",
            lambda: read(files, max_workers=1, **BOUNDS_ONLY),
        ),
        (f"{k} read_manifests (fastavro, 1 worker)", lambda: read(files, max_workers=1, decoder="fastavro")),
        (f"{k} PyIceberg fetch_manifest_entry each", lambda: [p() for p in peers]),
    ]
    for name, fn in cases:
        warm_s, _ = rep.once(fn)
        timing, _ = rep.measure(fn, max(1, args.repeat // 2))
        out.append(_record(name, timing, n, warm_s))
        print(
            f"{name:<66} {out[-1]['entries_s_best']:>10,.0f} entries/s  (best {timing.best_s:.4f} s)",
            flush=True,
        )
    return {"manifests": args.small, "entries_each": per}


def main() -> int:
    parser = rep.arg_parser(__doc__)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--columns", type=int, default=15)
    parser.add_argument("--codec", default="deflate")
    parser.add_argument("--small", type=int, default=100, help="manifests in the many-small-manifests case")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=rep.DEFAULT_OUT)
    args = parser.parse_args()
    payload: dict[str, Any] = {"bench": "manifests", **rep.environment(PEER_PACKAGES)}
    payload |= {"device": "cpu-only", "device_slug": rep.cpu_slug(), "repeat": args.repeat, "seed": SEED}
    watch = rep.CpuWatch.start()
    payload |= run(args)
    payload["others_busy_cores"] = watch.others_busy_cores()
    payload["host"]["loadavg_at_end"] = list(os.getloadavg())
    path = rep.write_json(args.out / "manifests-cpu.json", payload)
    print(f"fast decoder equals the fastavro path: {payload['fast_equals_fastavro']}; wrote {path}")
    return 0 if payload["fast_equals_fastavro"] else 1


if __name__ == "__main__":
    sys.exit(main())
