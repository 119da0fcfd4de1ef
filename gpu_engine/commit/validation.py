"""Validation of a commit planned on an older snapshot: what may have changed since for the data files it
targets (:func:`validate_no_new_deletes`), used by merge-on-read deletes and by compaction.

Since the planned snapshot, on the branch: no targeted data file may have been removed, and (with
``positional=True``) no DV or position delete file that may apply to one may have been added (its
positions would be lost or stale). With ``equality=True`` an equality delete added since that may apply to
one (a global delete, or one of the target's spec and partition, as Java's DeleteFileIndex scopes it)
fails too (a compaction whose new files take a new sequence number would let such deletes miss rows they
should delete). A compaction that keeps the starting
sequence number passes a :class:`Respec` instead: equality deletes added since still apply to its new files,
but one scoped to a partition of one spec applies to files of that spec only, so it fails the rewrite when
the rewrite moves rows between that spec and another (it would delete rows it never matched, or let rows it
deleted come back).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ValidationError
from ..iceberg.content_file import EQUALITY_DELETES, POSITION_DELETES, ContentFile
from ..iceberg.manifests import DELETED, read_manifest
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import PartitionKey, partition_key
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO
from ..io.paths import PathMap, normalize
from ..io.position_deletes import PATH_FIELD_ID
from ..planning.position_scope import range_scope
from .entries import entries_of, snapshot_manifests
from .table_update import parent_of


@dataclass(frozen=True)
class Respec:
    """A rewrite of data files (``specs``: path to spec id) into files of ``output_spec_id``."""

    output_spec_id: int
    specs: Mapping[str, int]

    def moved_by(self, f: ContentFile, md: TableMetadata) -> str | None:
        """A data file whose rows the partition-scoped equality delete ``f`` would match differently after
        the rewrite (see the module doc), or None."""
        if f.content != EQUALITY_DELETES or md.spec_by_id(f.spec_id).is_unpartitioned:
            return None
        if f.spec_id == self.output_spec_id:  # applies after the rewrite to rows of other specs' files
            moved = [p for p, s in self.specs.items() if s != self.output_spec_id]
        else:  # applied before the rewrite to rows that move into the output spec
            moved = [p for p, s in self.specs.items() if s == f.spec_id]
        return min(moved, default=None)


def validate_no_new_deletes(
    io: FileIO,
    base: TableMetadata,
    branch: str,
    planned: int,
    targets: frozenset[str],
    *,
    action: str,
    positional: bool = True,
    equality: bool = False,
    partitions: Mapping[str, PartitionKey] | None = None,
    respec: Respec | None = None,
    own: Collection[int] = (),
    read: dict[str, pa.Table] | None = None,
) -> None:
    """:class:`ValidationError` unless the head of ``branch`` descends from ``planned`` and no snapshot
    since removed a targeted data file or added deletes that may apply to one (see the module doc).
    ``action`` names what was planned, for the message ("this delete"); ``partitions``: each target's spec
    and partition (without them an equality delete may apply to any target). Appends (which add data
    files only, by the spec) and the snapshots ``own`` (earlier commits of the same job, which removed
    other files and added no deletes) are passed over, as Java validates only the operations that can
    conflict. ``read``: manifests read so far, by path (for several validations against one base)."""
    for snap in snapshots_since(base, branch, planned, action=action):
        if snap.snapshot_id in own or snap.operation == "append":
            continue
        for m in snapshot_manifests(io, snap):
            if m.added_snapshot_id != snap.snapshot_id:
                continue
            table = None if read is None else read.get(m.manifest_path)
            if table is None:
                table = read_manifest(
                    replace(m, manifest_path=io.resolve(m.manifest_path)), open_input=io.open_input
                )
                if read is not None:
                    read[m.manifest_path] = table
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
                hit = _may_target(base, e.file, targets, positional, equality, partitions)
                moved = None if respec is None else respec.moved_by(e.file, base)
                if respec is not None and moved is not None:
                    raise ValidationError(
                        f"table {base.location}: snapshot {snap.snapshot_id} added equality deletes "
                        f"({e.file.path}) scoped to partitions of spec {e.file.spec_id} after {action} was "
                        f"planned on snapshot {planned}; rewriting data file {moved} into spec "
                        f"{respec.output_spec_id} would change the rows they delete"
                    )
                if hit is not None:
                    raise ValidationError(
                        f"table {base.location}: snapshot {snap.snapshot_id} added deletes ({e.file.path}) "
                        f"for data file {hit} after {action} was planned on snapshot {planned}"
                    )


def validate_lineage_kept(
    base: TableMetadata, branch: str, planned: int | None, read_lineage: bool, *, action: str
) -> None:
    """Rows that ``action`` read without row lineage (planned on format version < 3, or on a v3 table
    before its first v3 snapshot) are rewritten without ids. If a snapshot committed since gave them ids
    (the first one with ``first-row-id`` gives every existing row one; the action's own earlier commit
    too), the rewritten files would replace those with new ones (the spec: a moved row keeps its
    ``_row_id``): refused, to run again."""
    if read_lineage or planned is None:
        return
    since = snapshots_since(base, branch, planned, action=action)
    first = next((s for s in reversed(since) if s.first_row_id is not None), None)
    if first is not None:
        raise ValidationError(
            f"table {base.location}: snapshot {first.snapshot_id} gave every row an id (row lineage, format "
            f"version 3) after {action} was planned on snapshot {planned}, whose rows it read without ids: "
            "the rows it rewrote would lose those ids; run it again"
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


def _may_target(
    md: TableMetadata,
    f: ContentFile,
    targets: frozenset[str],
    positional: bool,
    equality: bool,
    partitions: Mapping[str, PartitionKey] | None,
) -> str | None:
    """A target the delete file ``f`` may apply to, among the kinds counted: a DV or position deletes by
    ``referenced_data_file``, else by its ``file_path`` bounds (without bounds any target); equality deletes
    by partition (an unpartitioned one is global)."""
    if f.content == EQUALITY_DELETES:
        if not equality or not targets:
            return None
        if partitions is None or md.spec_by_id(f.spec_id).is_unpartitioned:
            return min(targets)
        key = partition_key(f.spec_id, f.partition)
        return next((t for t in sorted(targets) if partitions.get(t, key) == key), None)
    if f.content != POSITION_DELETES or not positional:
        return None
    if f.referenced_data_file is not None:  # reads match it across spellings: so must a conflict
        wanted = normalize(f.referenced_data_file)
        return next((t for t in sorted(targets) if normalize(t) == wanted), None)
    scope = range_scope(f.lower_bounds.get(PATH_FIELD_ID), f.upper_bounds.get(PATH_FIELD_ID), PathMap())
    return next((t for t in sorted(targets) if scope.may_hold(t)), None)
