"""Shared helpers for the planner tests: the fixture tables (read in place, remapped), their raw manifest
entries (trusted input: the planner's index and pruning rules are what is under test), and a PyIceberg
FileIO that applies our path map on read."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO

import gpu_engine as ge
from gpu_engine.iceberg.manifest_list import ManifestFile, manifest_files_from_paths, read_manifest_list
from gpu_engine.iceberg.manifests import DELETED, read_manifests
from gpu_engine.iceberg.metadata import TableMetadata
from gpu_engine.iceberg.snapshots import Snapshot
from gpu_engine.io.paths import PathMap, normalize
from gpu_engine.table import Table

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
SHARED = FIXTURES.parent
MISSING = "<fixtures missing>"
PATH_FIELD_ID = 2147483546  # file_path of position delete files (spec "Position Delete Files")


def require_fixtures() -> None:
    if not (FIXTURES / "INVENTORY.json").is_file():
        pytest.fail(f"fixtures not found at {FIXTURES} (expected ../shared/fixtures next to the repo)")


@cache
def inventory() -> dict[str, dict[str, Any]]:
    """INVENTORY.json's tables by path (relative to shared/, e.g. ``fixtures/impala/...``)."""
    require_fixtures()
    data = json.loads((FIXTURES / "INVENTORY.json").read_text())
    return {t["path"]: t for t in data["tables"]}


def inventory_paths() -> list[str]:
    """Parametrization ids; a single marker id when the fixtures are missing (that test then fails)."""
    if not (FIXTURES / "INVENTORY.json").is_file():
        return [MISSING]
    return sorted(t["path"] for t in json.loads((FIXTURES / "INVENTORY.json").read_text())["tables"])


def extra_path_map(rel: str) -> dict[str, str]:
    """INVENTORY's ``extra_remap`` (prefixes beyond the table location) as absolute local prefixes."""
    entry = inventory()[rel]
    return {old: str(SHARED / new) for old, new in (entry.get("extra_remap") or {}).items()}


def load(rel: str, *, extra: bool = True) -> Table:
    """The fixture table ``rel`` (relative to shared/ or fixtures/) read in place with relocate=True."""
    require_fixtures()
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    if not rel.startswith("fixtures/"):
        rel = "fixtures/" + rel
    path_map = extra_path_map(rel) if extra and rel in inventory() else {}
    return ge.load_table(SHARED / rel, relocate=True, path_map=path_map or None)


def exists(path: str) -> bool:
    return Path(normalize(path)).is_file()


def manifest_files(tbl: Table, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
    io = tbl.io
    if snapshot.manifest_list is not None:
        return read_manifest_list(io.resolve(snapshot.manifest_list), path_map=io.path_map)
    assert snapshot.manifests is not None
    return manifest_files_from_paths(
        snapshot.manifests, snapshot_id=snapshot.snapshot_id, path_map=io.path_map
    )


def missing_metadata_files(tbl: Table, snapshot: Snapshot) -> list[str]:
    """The snapshot's manifest list if it is missing, else its missing manifests (resolved paths)."""
    if snapshot.manifest_list is not None:
        resolved = tbl.io.resolve(snapshot.manifest_list)
        if not exists(resolved):
            return [resolved]
    return [m.manifest_path for m in manifest_files(tbl, snapshot) if not exists(m.manifest_path)]


@dataclass(frozen=True)
class Entry:
    """One live manifest entry (data or delete file) as the spec's scan-planning rules need it."""

    path: str  # normalised
    content: int  # 0 data, 1 position deletes / DV, 2 equality deletes
    file_format: str
    spec_id: int
    partition: tuple[Any, ...]
    seq: int
    referenced: str | None  # normalised
    offset: int | None
    path_lower: bytes | None  # position deletes: bounds of the file_path column
    path_upper: bytes | None
    named: str | None = None  # normalised: the one data file equal file_path bounds name
    equality_ids: tuple[int, ...] = ()

    @property
    def is_dv(self) -> bool:
        return self.content == 1 and self.file_format == "PUFFIN"

    @property
    def key(self) -> tuple[str, int | None]:
        return self.path, self.offset


def live_entries(tbl: Table, snapshot: Snapshot) -> list[Entry]:
    """Every ADDED/EXISTING entry of the snapshot's manifests, read with the manifest reader."""
    manifests = manifest_files(tbl, snapshot)
    out: list[Entry] = []
    for table in read_manifests(manifests, path_map=tbl.io.path_map):
        for row in table.to_pylist():
            if row["status"] == DELETED:
                continue
            lower = dict(row["lower_bounds"] or [])
            upper = dict(row["upper_bounds"] or [])
            ref = row["referenced_data_file"]
            out.append(
                Entry(
                    path=normalize(row["file_path"]),
                    content=row["content"],
                    file_format=row["file_format"],
                    spec_id=row["spec_id"],
                    partition=tuple(row["partition"].values()),
                    seq=row["sequence_number"] if row["sequence_number"] is not None else 0,
                    referenced=None if ref is None else normalize(ref),
                    offset=row["content_offset"],
                    path_lower=lower.get(PATH_FIELD_ID),
                    path_upper=upper.get(PATH_FIELD_ID),
                    named=_named(lower.get(PATH_FIELD_ID), upper.get(PATH_FIELD_ID), tbl.io.path_map),
                    equality_ids=tuple(row["equality_ids"] or ()),
                )
            )
    return out


def unpartitioned_specs(md: TableMetadata) -> frozenset[int]:
    """Spec ids with no field that partitions data (no fields, or void transforms only)."""
    return frozenset(
        sid for sid, spec in md.specs.items() if all(str(f.transform) == "void" for f in spec.fields)
    )


# -- the spec's scope rules, written independently of the planner ----------------------------------


def _value_key(value: Any) -> Any:
    """Partition values compare as the spec's note 3 says: floats by IEEE bits, NaN canonical."""
    if isinstance(value, float):
        return ("float-bits", struct.pack(">d", math.nan if math.isnan(value) else value))
    return value


def _partition(e: Entry) -> tuple[int, tuple[Any, ...]]:
    return e.spec_id, tuple(_value_key(v) for v in e.partition)


def _named(lower: bytes | None, upper: bytes | None, path_map: PathMap) -> str | None:
    if lower is None or lower != upper:
        return None
    return normalize(path_map.apply(lower.decode()))


def spec_deletes(
    entries: list[Entry], unpartitioned: frozenset[int]
) -> dict[str, set[tuple[str, int | None]]]:
    """Data file -> the delete files (path, content offset) that must apply, per "Scan Planning"; a
    position delete file whose ``file_path`` lower and upper bounds are equal holds rows of that one data
    file only, so it applies to no other (Iceberg Java's file-scoped deletes)."""
    data = [e for e in entries if e.content == 0]
    dvs = [e for e in entries if e.is_dv]
    positions = [e for e in entries if e.content == 1 and not e.is_dv]
    equalities = [e for e in entries if e.content == 2]
    out: dict[str, set[tuple[str, int | None]]] = {}
    for d in data:
        applied = {
            v.key for v in dvs if v.referenced == d.path and d.seq <= v.seq and _partition(v) == _partition(d)
        }
        if not applied:  # a DV supersedes position delete files
            applied = {
                p.key
                for p in positions
                if (p.referenced or p.named) in (None, d.path)
                and d.seq <= p.seq
                and _partition(p) == _partition(d)
            }
        applied |= {
            q.key
            for q in equalities
            if d.seq < q.seq and (_partition(q) == _partition(d) or q.spec_id in unpartitioned)
        }
        out[d.path] = applied
    return out


class RemappingFileIO(PyArrowFileIO):
    """PyIceberg's PyArrowFileIO reading every location through our path map (the table was moved)."""

    def __init__(self, path_map: PathMap) -> None:
        super().__init__({})
        self.path_map = path_map

    def new_input(self, location: str) -> PyArrowFile:
        return super().new_input(self.path_map.apply(location))


def same_columns(md: TableMetadata, *snapshot_ids: int) -> list[str]:
    """Current top-level columns every given snapshot's schema has with the same id, name and type
    (nested ones included), so that rows read in any of these schemas compare."""
    out = []
    for f in md.schema.fields:
        key = (f.field_id, f.name, f.type)
        for snapshot_id in snapshot_ids:
            schema_id = md.snapshot_by_id(snapshot_id).schema_id
            old = md.schema_by_id(schema_id) if schema_id is not None else md.schema
            if key not in {(g.field_id, g.name, g.type) for g in old.fields}:
                break
        else:
            out.append(f.name)
    return out
