"""Row-level deletes by filter, planned and written as merge-on-read delete files (the data files stay).

:func:`plan_row_deletes` scans the table's current snapshot for ``_file``/``_pos`` of the rows matching
the filter. The scan applies every delete that applies today (DVs, position and equality deletes), so
the positions found are exactly the live matching rows. Files whose partition decides that every row
matches (residual ``true``, as when deleting whole partitions) and that no equality delete applies to are
not read: their live positions come from their DVs and position delete files (a metadata-only delete).
Per data file it also gathers the positional deletes that apply now (the spec: a new DV must merge the old
DV and any position deletes, and at most one DV may exist per data file) and whether every live row
becomes deleted (the caller may then remove the data file instead).

Paths: scans and plans see *resolved* paths (recorded paths mapped through the table's path map), but
new delete files must name data files exactly as their manifest entries record them, and removals go by
recorded path. The manifests the planner kept are therefore read once more without the path map (the
same pruning, so the same manifests), mapped with the same vectorised :meth:`PathMap.apply_array` the
planner used, and matched to the plan's data and delete files: every :class:`FileRowDeletes` and every
delete file it names is a recorded entry.

What a commit must do with the result (:func:`write_row_deletes` writes the files):

- v2 (position delete files): add one position delete file per partition with ``new_positions``;
- v3 (deletion vectors): add one Puffin file with a DV of ``merged_positions`` per data file and remove
  the ``replaced`` entries: the old DV(s) of the file (a DV is one entry of a Puffin file: identify it by
  ``(path, content_offset)``, not by path) and position delete files all of whose target data files get
  a DV (or are removed) in this commit; other position delete files stay (readers ignore them for a data
  file that has a DV);
- a ``fully_deleted`` file may be removed instead, with the DVs that apply to it (the spec requires it)
  and, in v2 too, the position delete files whose every target is removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PlanningError, UnsupportedFeature
from ..execute.projection import project
from ..execute.scan import execute
from ..expressions import TRUE, AlwaysTrue, Expression
from ..iceberg import metadata_columns as mc
from ..iceberg.content_file import ContentFile
from ..iceberg.deletion_vectors import read_dv, sorted_unique
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifests import DELETED, read_manifest
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import partition_key
from ..io.dv_write import DeletionVector, write_deletion_vectors
from ..io.fileio import FileIO
from ..io.paths import normalize
from ..io.position_delete_write import write_position_deletes
from ..io.position_deletes import PositionDeletes, load_position_deletes
from ..planning import pruning
from ..planning.scan import ScanOptions, plan_scan
from ..tasks import EQUALITY_DELETES, DeleteFile, ScanPlan, ScanTask
from .entries import entries_of, snapshot_manifests

if TYPE_CHECKING:
    from ..table import Table

__all__ = ["FileRowDeletes", "RowDeleteFiles", "RowDeletes", "plan_row_deletes", "write_row_deletes"]

Positions = npt.NDArray[np.int64]
_COLUMNS = (mc.HIDDEN_FILE, mc.HIDDEN_POS)


@dataclass(frozen=True, eq=False)
class FileRowDeletes:
    """The rows a delete removes from one data file (paths as recorded in the manifests).

    ``new_positions``: the live rows matching the filter (sorted, unique); ``existing_positions``: rows
    already deleted by the DVs and position delete files in ``applied``; ``merged_positions``: both, the
    content of the file's new DV (v3). ``replaced``: delete entries this change makes redundant (see the
    module doc); ``fully_deleted``: no live row is left afterwards (equality deletes counted too).
    """

    path: str
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    data_sequence_number: int | None
    new_positions: Positions = field(repr=False)
    existing_positions: Positions = field(repr=False)
    merged_positions: Positions = field(repr=False)
    applied: tuple[ContentFile, ...]
    replaced: tuple[ContentFile, ...]
    live_rows: int  # live rows before this delete
    fully_deleted: bool
    task: ScanTask = field(repr=False)  # the file with the deletes that apply to it (resolved paths)

    def __repr__(self) -> str:
        return (
            f"FileRowDeletes({self.path!r}, new={len(self.new_positions)}, "
            f"merged={len(self.merged_positions)}, replaced={len(self.replaced)}, "
            f"fully_deleted={self.fully_deleted})"
        )


@dataclass(frozen=True)
class RowDeletes:
    """A planned delete: the snapshot it was planned on and, per data file with rows to delete, what to
    delete (files in recorded path order)."""

    snapshot_id: int | None
    format_version: int
    filter: Expression
    files: tuple[FileRowDeletes, ...]

    @property
    def deleted_rows(self) -> int:
        return sum(len(f.new_positions) for f in self.files)

    @property
    def fully_deleted(self) -> tuple[FileRowDeletes, ...]:
        return tuple(f for f in self.files if f.fully_deleted)

    def partitions(self) -> list[tuple[int, tuple[Any, ...], list[FileRowDeletes]]]:
        """The files grouped by (spec id, partition) as the spec compares partitions: one position delete
        file per group."""
        groups: dict[Any, tuple[int, tuple[Any, ...], list[FileRowDeletes]]] = {}
        for f in self.files:
            key = partition_key(f.spec_id, f.partition)
            groups.setdefault(key, (f.spec_id, f.partition, []))[2].append(f)
        return list(groups.values())


def plan_row_deletes(
    table: Table,
    filter: str | Expression,
    *,
    backend: str = "auto",
    case_sensitive: bool = True,
    branch: str | None = None,
    remove_all: bool = False,
) -> RowDeletes:
    """Plan deleting the rows of ``table`` (its current snapshot, or the head of ``branch``) that match
    ``filter``; see the module doc. ``remove_all``: every data file with a match will be removed (a
    copy-on-write delete rewrites them), so ``replaced`` names the deletes that only they need."""
    md, io = table.metadata, table.io
    options = ScanOptions(filter, ref=branch_ref(md, branch), case_sensitive=case_sensitive)
    plan = plan_scan(md, io, options)
    if plan.summary.snapshot_id is None or not plan.tasks:
        return RowDeletes(plan.summary.snapshot_id, md.format_version, plan.filter, ())
    whole = _wholly_matched(plan.tasks)
    scanned = tuple(t for t in plan.tasks if t.file.path not in whole)
    matches = _matching_positions(md, io, replace(plan, tasks=scanned), backend, case_sensitive)
    matches.update(_all_live_positions(io, whole))
    if not matches:
        return RowDeletes(plan.summary.snapshot_id, md.format_version, plan.filter, ())
    tasks = {t.file.path: t for t in plan.tasks}
    hit = [tasks[p] for p in matches]
    recorded = RecordedEntries.read(md, io, plan, hit)
    existing, targets = existing_deletes(io, hit)
    live = _live_rows(md, io, plan, hit, existing, backend, case_sensitive)
    files: list[FileRowDeletes] = []
    for task in hit:
        path = task.file.path
        new, old = matches[path], existing[path]
        merged = _union(old, new)
        files.append(
            FileRowDeletes(
                path=recorded.data[path].path,
                spec_id=recorded.data[path].spec_id,
                partition=recorded.data[path].partition,
                record_count=task.file.record_count,
                data_sequence_number=task.file.data_sequence_number,
                new_positions=new,
                existing_positions=old,
                merged_positions=merged,
                applied=tuple(recorded.delete(d) for d in task.deletes if d.content != EQUALITY_DELETES),
                replaced=(),
                live_rows=live[path],
                fully_deleted=len(new) == live[path],
                task=ScanTask(task.file, 0, task.file.file_size_in_bytes, task.deletes, TRUE, live[path]),
            )
        )
    files = _with_replaced(md.format_version, files, hit, targets, recorded, remove_all=remove_all)
    files.sort(key=lambda f: f.path.encode("utf-8"))
    return RowDeletes(plan.summary.snapshot_id, md.format_version, plan.filter, tuple(files))


def branch_ref(md: TableMetadata, branch: str | None) -> str | None:
    """The ref a scan of ``branch`` reads: the branch, or (a branch not created yet forks from the
    current snapshot, as commits do) None."""
    return branch if branch is not None and branch in md.refs else None


# -- the scan -------------------------------------------------------------------------------------------


def _matching_positions(
    md: TableMetadata, io: FileIO, plan: ScanPlan, backend: str, case_sensitive: bool
) -> dict[str, Positions]:
    """Resolved data file path -> sorted unique positions of its live rows matching the plan's filter."""
    return positions_by_file(scan_positions(md, io, plan, backend, case_sensitive))


def _wholly_matched(tasks: Sequence[ScanTask]) -> dict[str, ScanTask]:
    """The files whose every row matches (their partition decides: the residual is true) and that no
    equality delete applies to, by resolved path: their matching rows are known without reading them."""
    out: dict[str, ScanTask] = {}
    for t in tasks:
        if isinstance(t.residual, AlwaysTrue) and not any(d.content == EQUALITY_DELETES for d in t.deletes):
            out[t.file.path] = t
    return out


def _all_live_positions(io: FileIO, whole: dict[str, ScanTask]) -> dict[str, Positions]:
    """The positions no DV or position delete removes, per file of ``whole`` (from the delete files)."""
    existing, _ = existing_deletes(io, list(whole.values()))
    out = {}
    for path, t in whole.items():
        live = np.setdiff1d(
            np.arange(t.file.record_count, dtype=np.int64), existing[path], assume_unique=True
        )
        if len(live):
            out[path] = live
    return out


def scan_positions(
    md: TableMetadata, io: FileIO, plan: ScanPlan, backend: str, case_sensitive: bool
) -> Iterable[pa.RecordBatch]:
    projection = project(md, plan.schema, _COLUMNS, case_sensitive=case_sensitive)
    _, batches = execute(md, io, plan, projection, backend=backend, case_sensitive=case_sensitive)
    return batches


def positions_by_file(batches: Iterable[pa.RecordBatch]) -> dict[str, Positions]:
    """Group ``_file``/``_pos`` rows by file, keeping only a small id per row (never a string per row)."""
    ids: dict[str, int] = {}
    id_parts: list[npt.NDArray[np.int64]] = []
    pos_parts: list[Positions] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        encoded = pc.dictionary_encode(batch.column(mc.HIDDEN_FILE))
        lookup = np.array([ids.setdefault(p, len(ids)) for p in encoded.dictionary.to_pylist()], np.int64)
        id_parts.append(lookup[encoded.indices.to_numpy()])
        pos_parts.append(batch.column(mc.HIDDEN_POS).to_numpy().astype(np.int64, copy=False))
    if not ids:
        return {}
    file_ids, pos = np.concatenate(id_parts), np.concatenate(pos_parts)
    order = np.lexsort((pos, file_ids))
    file_ids, pos = file_ids[order], pos[order]
    starts = np.flatnonzero(np.diff(file_ids, prepend=-1))
    ends = np.append(starts[1:], len(pos))
    names = list(ids)
    return {
        names[int(file_ids[s])]: sorted_unique(pos[s:e])
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    }


def _live_rows(
    md: TableMetadata,
    io: FileIO,
    plan: ScanPlan,
    hit: Sequence[ScanTask],
    existing: dict[str, Positions],
    backend: str,
    case_sensitive: bool,
) -> dict[str, int]:
    """Live rows per data file: ``record_count`` less positional deletes, or (when equality deletes apply)
    counted by reading the file's tasks with every delete applied and no filter."""
    out = {t.file.path: t.file.record_count - len(existing[t.file.path]) for t in hit}
    equality = {t.file.path for t in hit if any(d.content == EQUALITY_DELETES for d in t.deletes)}
    if equality:
        tasks = tuple(replace(t, residual=TRUE) for t in plan.tasks if t.file.path in equality)
        counted = positions_by_file(
            scan_positions(md, io, replace(plan, tasks=tasks), backend, case_sensitive)
        )
        for path in equality:
            out[path] = len(counted.get(path, ()))
    return out


# -- existing deletes --------------------------------------------------------------------------------------


def existing_deletes(
    io: FileIO, hit: Sequence[ScanTask]
) -> tuple[dict[str, Positions], dict[tuple[str, int | None], frozenset[str]]]:
    """Per resolved data file path the positions its DVs and position delete files delete now, and per
    position delete file (path, None) the normalised data files it names."""
    loaded: dict[str, PositionDeletes] = {}
    targets: dict[tuple[str, int | None], frozenset[str]] = {}
    out: dict[str, Positions] = {}
    for task in hit:
        parts: list[Positions] = []
        for d in task.deletes:
            if d.content == EQUALITY_DELETES:
                continue
            if d.is_deletion_vector:
                parts.append(np.asarray(read_dv(io, d), dtype=np.int64))
                continue
            if d.path not in loaded:
                loaded[d.path] = load_position_deletes(io, d)
                targets[(d.path, d.content_offset)] = loaded[d.path].targets
            parts.append(np.asarray(loaded[d.path].positions_for(task.file.path), dtype=np.int64))
        merged = sorted_unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
        if len(merged) and int(merged[-1]) >= task.file.record_count:
            raise PlanningError(
                f"data file {task.file.path}: its deletes name position {int(merged[-1])} but it has "
                f"{task.file.record_count} rows"
            )
        out[task.file.path] = merged
    return out, targets


def _with_replaced(
    format_version: int,
    files: list[FileRowDeletes],
    hit: Sequence[ScanTask],
    targets: dict[tuple[str, int | None], frozenset[str]],
    recorded: RecordedEntries,
    *,
    remove_all: bool,
) -> list[FileRowDeletes]:
    """Fill ``replaced``: the file's DVs (when it gets a new DV or is removed) and the position delete
    files all of whose targets are covered (v3: every file of this delete gets a DV or is removed; v2: only
    removed files are covered, all of them with ``remove_all``)."""
    covered = {
        normalize(t.file.path)
        for t, f in zip(hit, files, strict=True)
        if format_version >= 3 or f.fully_deleted or remove_all
    }
    out = []
    for task, f in zip(hit, files, strict=True):
        if normalize(task.file.path) not in covered:
            out.append(f)
            continue
        replaced = [
            recorded.delete(d)
            for d in task.deletes
            if d.is_deletion_vector
            or (d.content != EQUALITY_DELETES and targets[(d.path, d.content_offset)] <= covered)
        ]
        out.append(replace(f, replaced=tuple(replaced)))
    return out


# -- recorded paths -------------------------------------------------------------------------------------


@dataclass
class RecordedEntries:
    """The manifest entries (recorded paths) of the plan's data files and delete files, by resolved path
    (delete files by resolved path and content offset)."""

    data: dict[str, ContentFile]
    deletes: dict[tuple[str, int | None], ContentFile]

    def delete(self, d: DeleteFile) -> ContentFile:
        return self.deletes[(d.path, d.content_offset)]

    @staticmethod
    def read(md: TableMetadata, io: FileIO, plan: ScanPlan, hit: Sequence[ScanTask]) -> RecordedEntries:
        snapshot = (
            md.snapshot_by_id(plan.summary.snapshot_id) if plan.summary.snapshot_id is not None else None
        )
        assert snapshot is not None
        manifests = snapshot_manifests(io, snapshot)
        want_data = {t.file.path for t in hit}
        want_deletes = {
            (d.path, d.content_offset) for t in hit for d in t.deletes if d.content != EQUALITY_DELETES
        }
        data_manifests = [m for m in manifests if m.content == 0]
        delete_manifests = [m for m in manifests if m.content != 0]
        entries = RecordedEntries({}, {})
        if want_data:
            for m in pruning.prune_manifests(md, plan.schema, plan.filter, data_manifests):
                for resolved, f in _entries(md, io, m, want_data, data=True):
                    entries.data[resolved] = f
        if want_deletes:
            wanted_paths = {p for p, _ in want_deletes}
            for m in pruning.prune_manifests(md, plan.schema, plan.filter, delete_manifests):
                for resolved, f in _entries(md, io, m, wanted_paths, data=False):
                    entries.deletes[(resolved, f.content_offset)] = f
        missing = sorted(want_data - set(entries.data)) + sorted(
            p for p, _ in want_deletes - set(entries.deletes)
        )
        if missing:
            raise PlanningError(
                f"table {md.location}: {len(missing)} planned file(s) have no live entry in the manifests of "
                f"snapshot {snapshot.snapshot_id} (first: {missing[0]})"
            )
        return entries


def _entries(
    md: TableMetadata, io: FileIO, manifest: ManifestFile, wanted: set[str], *, data: bool
) -> list[tuple[str, ContentFile]]:
    """(resolved path, recorded entry) of the live entries of ``manifest`` whose resolved path is wanted."""
    resolved_manifest = replace(manifest, manifest_path=io.resolve(manifest.manifest_path))
    # data files: only path and partition are needed; delete files are kept whole (they may be removed)
    table = read_manifest(resolved_manifest, open_input=io.open_input, columns=() if data else None)
    resolved = (
        io.path_map.apply_array(table.column("file_path")) if io.path_map else table.column("file_path")
    )
    live = pc.not_equal(table.column("status"), pa.scalar(DELETED, pa.int32()))
    keep = pc.and_(live, pc.is_in(resolved, value_set=pa.array(sorted(wanted), pa.string())))
    if not pc.any(keep).as_py():
        return []
    table, resolved = table.filter(keep), pc.filter(resolved, keep)
    spec_id = manifest.partition_spec_id
    if spec_id is None:
        spec_id = int(table.column("spec_id")[0].as_py())
    found = entries_of(table, manifest, md.spec_by_id(spec_id))
    return list(zip(resolved.to_pylist(), (e.file for e in found), strict=True))


# -- writing ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowDeleteFiles:
    """The delete files written for a :class:`RowDeletes` and what the commit must remove.

    ``removed_delete_files`` hold DV entries: a DV is identified by ``(path, content_offset)`` (its Puffin
    file may hold DVs of other data files that stay)."""

    added: tuple[ContentFile, ...]
    removed_data_files: tuple[str, ...]
    removed_delete_files: tuple[ContentFile, ...]


def write_row_deletes(
    table: Table, deletes: RowDeletes, *, remove_fully_deleted: bool = True
) -> RowDeleteFiles:
    """Write the delete files of ``deletes`` for ``table`` (planned on its current metadata): position
    delete files (v2, one per partition) or one Puffin file of merged DVs (v3). With
    ``remove_fully_deleted`` the data files left without live rows are removed instead of getting deletes.
    Files already written are deleted if a later one fails. :class:`UnsupportedFeature` for v1 tables."""
    md, io = table.metadata, table.io
    if deletes.format_version < 2:
        raise UnsupportedFeature(
            f"table {md.location}: format version 1 has no row-level deletes (upgrade it: "
            "tbl.update_properties().set('format-version', '2'), or delete copy-on-write: "
            "write.delete.mode=copy-on-write)"
        )
    removed = [f for f in deletes.files if remove_fully_deleted and f.fully_deleted]
    kept = [f for f in deletes.files if not (remove_fully_deleted and f.fully_deleted)]
    added: list[ContentFile] = []
    try:
        if deletes.format_version >= 3:
            if kept:
                dvs = [DeletionVector(f.path, f.merged_positions, f.partition, f.spec_id) for f in kept]
                added += write_deletion_vectors(io, md.location, dvs, properties=md.properties)
            dropped = [d for f in deletes.files for d in f.replaced]
        else:
            group = RowDeletes(deletes.snapshot_id, deletes.format_version, deletes.filter, tuple(kept))
            for spec_id, partition, files in group.partitions():
                added.append(
                    write_position_deletes(
                        io,
                        md.location,
                        md.spec_by_id(spec_id),
                        spec_id,
                        partition,
                        {f.path: f.new_positions for f in files},
                        data_partitions={f.path: (f.spec_id, f.partition) for f in files},
                        schema=md.schema_for_spec(md.spec_by_id(spec_id)),
                        properties=md.properties,
                    )
                )
            dropped = [d for f in removed for d in f.replaced]
    except BaseException:
        for f in {f.path for f in added}:
            io.delete(io.resolve(f), missing_ok=True)
        raise
    unique = {(d.path, d.content_offset): d for d in dropped}
    return RowDeleteFiles(tuple(added), tuple(f.path for f in removed), tuple(unique.values()))


# -- helpers ----------------------------------------------------------------------------------------------


def _union(a: Positions, b: Positions) -> Positions:
    if not len(a):
        return b
    if not len(b):
        return a
    return sorted_unique(np.concatenate([a, b]))
