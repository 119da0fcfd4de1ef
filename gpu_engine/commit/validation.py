"""Validation of a commit planned on an older snapshot: what may have changed since for the data files it
targets (:func:`validate_no_new_deletes`), used by merge-on-read deletes and by compaction.

Since the planned snapshot, on the branch: no targeted data file may have been removed, and no DV or
position delete file that may apply to one may have been added (its positions would be lost or stale).
With ``equality=True`` an equality delete added since fails too (a compaction whose new files take a new
sequence number would let such deletes miss rows they should delete).
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ValidationError
from ..iceberg.content_file import EQUALITY_DELETES, POSITION_DELETES, ContentFile
from ..iceberg.manifests import DELETED, read_manifest
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO
from ..io.position_deletes import PATH_FIELD_ID
from .entries import entries_of, snapshot_manifests
from .table_update import parent_of


def validate_no_new_deletes(
    io: FileIO,
    base: TableMetadata,
    branch: str,
    planned: int,
    targets: frozenset[str],
    *,
    action: str,
    equality: bool = False,
) -> None:
    """:class:`ValidationError` unless the head of ``branch`` descends from ``planned`` and no snapshot
    since removed a targeted data file or added deletes that may apply to one (see the module doc).
    ``action`` names what was planned, for the message ("this delete")."""
    for snap in snapshots_since(base, branch, planned, action=action):
        for m in snapshot_manifests(io, snap):
            if m.added_snapshot_id != snap.snapshot_id:
                continue
            table = read_manifest(
                replace(m, manifest_path=io.resolve(m.manifest_path)), open_input=io.open_input
            )
            if m.content == 0:
                gone = pc.and_(
                    pc.equal(table.column("status"), pa.scalar(DELETED, pa.int32())),
                    pc.is_in(table.column("file_path"), value_set=pa.array(sorted(targets), pa.string())),
                )
                if pc.any(gone).as_py():
                    path = pc.filter(table.column("file_path"), gone)[0].as_py()
                    raise ValidationError(
                        f"table {base.location}: data file {path} was removed by snapshot {snap.snapshot_id} "
                        f"after {action} was planned on snapshot {planned}"
                    )
                continue
            spec_id = m.partition_spec_id if m.partition_spec_id is not None else 0
            for e in entries_of(table, m, base.spec_by_id(spec_id)):
                if e.snapshot_id != snap.snapshot_id:
                    continue
                hit = _may_target(e.file, targets, equality)
                if hit is not None:
                    raise ValidationError(
                        f"table {base.location}: snapshot {snap.snapshot_id} added deletes ({e.file.path}) "
                        f"for data file {hit} after {action} was planned on snapshot {planned}"
                    )


def snapshots_since(base: TableMetadata, branch: str, planned: int, *, action: str) -> list[Snapshot]:
    """The snapshots of ``branch`` after ``planned``, newest first."""
    out: list[Snapshot] = []
    snap = parent_of(base, branch)
    while snap is not None and snap.snapshot_id != planned:
        out.append(snap)
        parent = snap.parent_snapshot_id
        snap = None if parent is None else base.snapshots_by_id.get(parent)
    if snap is None:
        raise ValidationError(
            f"table {base.location}: branch {branch!r} no longer descends from snapshot {planned}, on which "
            f"{action} was planned"
        )
    return out


def _may_target(f: ContentFile, targets: frozenset[str], equality: bool) -> str | None:
    """A target the delete file ``f`` may apply to (a DV or position deletes by ``referenced_data_file``,
    else by its ``file_path`` bounds, without bounds any target; equality deletes, when counted, any)."""
    if f.content == EQUALITY_DELETES:
        return min(targets) if equality and targets else None
    if f.content != POSITION_DELETES:
        return None
    if f.referenced_data_file is not None:
        return f.referenced_data_file if f.referenced_data_file in targets else None
    lower, upper = f.lower_bounds.get(PATH_FIELD_ID), f.upper_bounds.get(PATH_FIELD_ID)
    for t in sorted(targets):
        if lower is None or upper is None or lower <= t.encode("utf-8") <= upper:
            return t
    return None
