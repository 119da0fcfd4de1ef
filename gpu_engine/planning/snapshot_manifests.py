"""The manifests a snapshot lists, checked against its summary's totals."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable

import pyarrow as pa

from ..errors import PlanningError
from ..iceberg.manifest_list import (
    ManifestFile,
    check_listed_totals,
    manifest_files_from_paths,
    read_manifest_list,
)
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO


def manifest_files(md: TableMetadata, io: FileIO, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
    """The manifests ``snapshot`` lists (its manifest list, or a v1 snapshot's ``manifests``)."""
    if snapshot.manifest_list is not None:
        path = io.resolve(snapshot.manifest_list)
        manifests = read_manifest_list(path, path_map=io.path_map, open_input=io.open_input)
        check_listed_totals(path, snapshot.snapshot_id, snapshot.summary, manifests)
        return manifests
    if snapshot.manifests is not None:
        return manifest_files_from_paths(
            snapshot.manifests, snapshot_id=snapshot.snapshot_id, path_map=io.path_map
        )
    raise PlanningError(f"snapshot {snapshot.snapshot_id} has neither a manifest list nor manifests")


class ManifestCache:
    """Manifest tables kept between the plans of successive snapshots of one table (a changelog plans
    every snapshot of its range, and consecutive snapshots list mostly the same manifests), by path, by
    what entries inherit from the manifest list (sequence number, ``first_row_id``: the first v3 snapshot
    after an upgrade assigns row ids to manifests listed before without one) and by ``variant`` (which
    metrics ``read`` decodes). :meth:`keep_only` drops what a snapshot no longer lists, so memory follows
    one snapshot's manifests."""

    def __init__(self) -> None:
        self._tables: dict[tuple[str, int, int | None, Hashable], pa.Table] = {}
        self.hits = 0
        self.misses = 0

    def read(
        self, manifest: ManifestFile, read: Callable[[ManifestFile], pa.Table], variant: Hashable = None
    ) -> pa.Table:
        key = (manifest.manifest_path, manifest.sequence_number, manifest.first_row_id, variant)
        table = self._tables.get(key)
        if table is None:
            self.misses += 1
            table = self._tables[key] = read(manifest)
        else:
            self.hits += 1
        return table

    def keep_only(self, paths: Collection[str]) -> None:
        keep = set(paths)
        self._tables = {k: t for k, t in self._tables.items() if k[0] in keep}
