"""A snapshot's manifests and their entries as the write path needs them: recorded paths (never remapped),
entries as :class:`~gpu_engine.iceberg.manifest_write.ManifestEntry` values that can be written again.

Entries come from :func:`gpu_engine.iceberg.manifests.read_manifest` with every inheritance rule applied,
so an entry rewritten as EXISTING or DELETED carries its snapshot id, sequence numbers and (v3 data files)
``first_row_id`` explicitly, as the spec requires of such entries.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa

from ..errors import ManifestError
from ..iceberg.content_file import ContentFile
from ..iceberg.manifest_list import (
    ManifestFile,
    check_listed_totals,
    manifest_files_from_paths,
    read_manifest_list,
)
from ..iceberg.manifest_write import ManifestEntry
from ..iceberg.manifests import DELETED, read_manifest
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO


def snapshot_manifests(io: FileIO, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
    """The manifests of ``snapshot`` with their paths as recorded (v1 ``manifests`` lists included),
    checked against the snapshot's totals (:func:`check_listed_totals`: a truncated list read as empty
    made expiry and orphan removal delete live files)."""
    if snapshot.manifest_list is not None:
        path = io.resolve(snapshot.manifest_list)
        manifests = read_manifest_list(path, open_input=io.open_input)
        check_listed_totals(path, snapshot.snapshot_id, snapshot.summary, manifests)
        return manifests
    if snapshot.manifests is not None:
        return manifest_files_from_paths(snapshot.manifests, snapshot_id=snapshot.snapshot_id)
    raise ManifestError(f"snapshot {snapshot.snapshot_id} has neither a manifest list nor manifests")


def live_entries(io: FileIO, manifest: ManifestFile, spec: PartitionSpec) -> list[ManifestEntry]:
    """The ADDED and EXISTING entries of ``manifest`` (DELETED ones are history and are dropped), partition
    tuples in the order of ``spec`` (the manifest's spec)."""
    resolved = replace(manifest, manifest_path=io.resolve(manifest.manifest_path))
    table = read_manifest(resolved, open_input=io.open_input)
    return entries_of(table, manifest, spec)


def manifest_spec_id(manifest: ManifestFile, table: pa.Table) -> int:
    """The spec id of ``manifest`` (its manifest-list entry's, else that of the entries read into ``table``,
    for the manifests a v1 snapshot lists by path; 0 for an empty one)."""
    if manifest.partition_spec_id is not None:
        return manifest.partition_spec_id
    ids = set(table.column("spec_id").to_pylist())
    return int(next(iter(ids))) if ids else 0


def entries_of(
    table: pa.Table,
    manifest: ManifestFile,
    spec: PartitionSpec,
    *,
    deleted_by: int | None = None,
    with_deleted: bool = False,
) -> list[ManifestEntry]:
    """Entries of a :func:`read_manifest` table, DELETED ones left out (unless ``with_deleted``) but those
    of snapshot ``deleted_by`` (a commit's own removals, when it rewrites a manifest it wrote)."""
    ids_by_name = {f.name: _field_id(f) for f in table.schema.field("partition").type}
    order = [f.field_id for f in spec.fields]
    missing = set(ids_by_name.values()) - set(order)
    if missing:
        raise ManifestError(
            f"{manifest.manifest_path}: partition field ids {sorted(missing)} are not in spec {spec.spec_id}"
        )
    out = []
    for row in table.to_pylist():
        own = deleted_by is not None and row["snapshot_id"] == deleted_by
        if row["status"] == DELETED and not (with_deleted or own):
            continue
        seq = row["sequence_number"]
        file_seq = row["file_sequence_number"]
        # EXISTING entries of some writers lack sequence numbers: they carry the manifest's
        seq = manifest.sequence_number if seq is None else seq
        file_seq = seq if file_seq is None else file_seq
        by_id = {ids_by_name[name]: value for name, value in (row["partition"] or {}).items()}
        partition = tuple(by_id.get(fid) for fid in order)
        out.append(ManifestEntry(row["status"], row["snapshot_id"], seq, file_seq, _file(row, partition)))
    return out


def _field_id(f: pa.Field) -> int:
    meta = f.metadata or {}
    return int(meta[b"field_id"])


def _file(row: dict[str, Any], partition: tuple[Any, ...]) -> ContentFile:
    return ContentFile(
        path=row["file_path"],
        file_format=row["file_format"],
        spec_id=row["spec_id"],
        partition=partition,
        record_count=row["record_count"],
        file_size_in_bytes=row["file_size_in_bytes"],
        content=row["content"],
        column_sizes=_map(row["column_sizes"]),
        value_counts=_map(row["value_counts"]),
        null_value_counts=_map(row["null_value_counts"]),
        nan_value_counts=_map(row["nan_value_counts"]),
        lower_bounds=_map(row["lower_bounds"]),
        upper_bounds=_map(row["upper_bounds"]),
        key_metadata=row["key_metadata"],
        split_offsets=None if row["split_offsets"] is None else tuple(row["split_offsets"]),
        equality_ids=None if row["equality_ids"] is None else tuple(row["equality_ids"]),
        sort_order_id=row["sort_order_id"],
        first_row_id=row["first_row_id"],
        referenced_data_file=row["referenced_data_file"],
        content_offset=row["content_offset"],
        content_size_in_bytes=row["content_size_in_bytes"],
    )


def _map(pairs: list[tuple[int, Any]] | None) -> dict[int, Any]:
    return {} if pairs is None else dict(pairs)
