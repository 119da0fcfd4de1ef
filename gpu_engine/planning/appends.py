"""What an incremental append scan reads: the data files ``append`` snapshots of a range added.

As Iceberg Java's ``IncrementalAppendScan``: only snapshots whose operation is ``append`` count (an
``overwrite``, ``delete`` or ``replace`` is passed over), their files are taken from the manifests those
snapshots wrote (so later manifest merges or rewrites do not hide them), and no delete file applies: the
rows are the rows as appended.

A snapshot without an operation (the summary is optional in v1) counts as an append when the manifests
it wrote only add data files: no delete manifest, no entry it deleted. Java passes such snapshots over,
which drops what they appended.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PlanningError
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifests import ADDED, DELETED, read_manifest
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO
from .snapshot_manifests import manifest_files
from .snapshot_range import SnapshotRange, snapshots_in_range


def append_snapshots(md: TableMetadata, io: FileIO, to: Snapshot, rng: SnapshotRange) -> tuple[Snapshot, ...]:
    """The ``append`` snapshots of the range, oldest first (one without an operation when its manifests
    show that it only added data files)."""
    chosen = []
    for snapshot in snapshots_in_range(md, to, rng):
        if snapshot.operation == "append" or (snapshot.operation is None and _only_added(md, io, snapshot)):
            chosen.append(snapshot)
    return tuple(chosen)


def _only_added(md: TableMetadata, io: FileIO, snapshot: Snapshot) -> bool:
    """Whether the manifests ``snapshot`` wrote hold no delete file and no entry it deleted (their counts,
    or their entries where a v1 manifest list leaves the counts out)."""
    own = [m for m in manifest_files(md, io, snapshot) if _written_by(md, m, snapshot, deletes=True)]
    if any(m.is_delete_manifest for m in own):
        return False
    for m in own:
        if m.deleted_files_count is None:
            entries = read_manifest(m, open_input=io.open_input, path_map=io.path_map, columns=())
            deleted = pc.equal(entries.column("status"), DELETED)
            if pc.any(
                pc.and_(deleted, pc.equal(entries.column("snapshot_id"), snapshot.snapshot_id))
            ).as_py():
                return False
        elif m.deleted_files_count:
            return False
    return True


def appended_manifests(
    md: TableMetadata, io: FileIO, to: Snapshot, rng: SnapshotRange
) -> tuple[list[ManifestFile], Callable[[pa.Table], pa.Table]]:
    """The data manifests the range's appends wrote, and the filter of their entries those appends added.

    A manifest or entry belongs to an append by its snapshot id or, from v2 on, by its (file) sequence
    number, which is the append's own: some writers' metadata rounds ids past 2**53 (the JSON holds
    ``...600`` for the ``...552`` the manifests record). An append whose summary counts more added data
    files than its manifests hold is an error, never a silently shorter result.
    """
    appends = append_snapshots(md, io, to, rng)
    ids = {s.snapshot_id for s in appends}
    # sequence number 0 is every v1-era snapshot's (written before an upgrade to v2): it identifies none
    seqs = {s.sequence_number for s in appends if s.sequence_number > 0} if md.format_version >= 2 else set()
    manifests: dict[str, ManifestFile] = {}
    for snapshot in appends:
        own = [m for m in manifest_files(md, io, snapshot) if _written_by(md, m, snapshot)]
        _check_added(md, snapshot, own)
        for m in own:
            if m.has_added_files():
                manifests.setdefault(m.manifest_path, m)
    wanted_ids = pa.array(sorted(ids), pa.int64())
    wanted_seqs = pa.array(sorted(seqs), pa.int64())

    def added_in_range(entries: pa.Table) -> pa.Table:
        ours = pc.or_(
            pc.is_in(entries.column("snapshot_id"), value_set=wanted_ids),
            pc.is_in(entries.column("file_sequence_number"), value_set=wanted_seqs),
        )
        return entries.filter(pc.and_(pc.equal(entries.column("status"), ADDED), ours))

    return list(manifests.values()), added_in_range


def _written_by(md: TableMetadata, m: ManifestFile, snapshot: Snapshot, *, deletes: bool = False) -> bool:
    """Whether ``snapshot`` wrote data manifest ``m`` (and delete manifests, with ``deletes``)."""
    if m.is_delete_manifest and not deletes:
        return False
    by_seq = (
        md.format_version >= 2
        and snapshot.sequence_number > 0
        and m.sequence_number == snapshot.sequence_number
    )
    return by_seq or m.added_snapshot_id == snapshot.snapshot_id


def _check_added(md: TableMetadata, snapshot: Snapshot, own: list[ManifestFile]) -> None:
    counts = [m.added_files_count for m in own]
    recorded = (snapshot.summary or {}).get("added-data-files")
    if recorded is None or not recorded.isdigit() or any(c is None for c in counts):
        return
    found = sum(c or 0 for c in counts)
    if found != int(recorded):
        raise PlanningError(
            f"table {md.location}: append snapshot {snapshot.snapshot_id} records "
            f"added-data-files={recorded} but the manifests it wrote add {found}: its manifest list is "
            "inconsistent with its metadata"
        )
