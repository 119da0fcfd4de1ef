"""Merge-on-read deletes committed as ``delete`` snapshots: :func:`delete` (rows matching a filter, as
position delete files in v2 and deletion vectors in v3) and :func:`delete_rows` (equality delete files).

:func:`delete` plans on the branch head (:func:`~gpu_engine.commit.delete_plan.plan_row_deletes`), writes
the delete files once (:func:`~gpu_engine.commit.delete_plan.write_row_deletes`) and commits them with a
validation that every attempt re-runs on the refreshed table: since the planned snapshot no targeted data
file may have been removed and no DV or position delete file may have been added for one (the positions
written would be stale, or a data file would end up with two DVs). A violation is a
:class:`~gpu_engine.errors.ValidationError`; the files this delete wrote are deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaMismatch, ValidationError
from ..expressions import Expression
from ..iceberg.content_file import POSITION_DELETES, ContentFile
from ..iceberg.manifests import DELETED, read_manifest
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import Snapshot
from ..io.equality_delete_write import write_equality_deletes
from ..io.fileio import FileIO
from .delete_plan import plan_row_deletes, write_row_deletes
from .entries import entries_of, snapshot_manifests
from .producer import check_committable, commit
from .table_update import parent_of
from .update import CommitResult, Faults, Removed, SnapshotUpdate, file_key

if TYPE_CHECKING:
    from ..table import Table

_FILE_PATH_ID = 2147483546  # the ``file_path`` column of position delete files


@dataclass(frozen=True)
class DeleteResult:
    """A delete: the rows it removed (0: nothing matched and nothing was committed), the files it added and
    removed, and its commit (None when nothing was committed)."""

    deleted_rows: int
    added: tuple[ContentFile, ...] = ()
    removed_data_files: tuple[str, ...] = ()
    removed_delete_files: tuple[ContentFile, ...] = ()
    commit: CommitResult | None = None

    @property
    def snapshot_id(self) -> int | None:
        return None if self.commit is None else self.commit.snapshot_id


def delete(
    table: Table,
    filter: str | Expression,
    *,
    branch: str = "main",
    backend: str = "auto",
    case_sensitive: bool = True,
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteResult:
    """Delete the rows of ``branch`` matching ``filter`` (merge-on-read; data files left without live rows
    are removed); see the module doc."""
    check_committable(table)
    if branch == "main" and table.metadata.current_snapshot() is None:
        return DeleteResult(0)  # an empty table: nothing can match
    plan = plan_row_deletes(table, filter, backend=backend, case_sensitive=case_sensitive, branch=branch)
    if not plan.files or plan.snapshot_id is None:
        return DeleteResult(0)
    out = write_row_deletes(table, plan)
    removed: list[Removed] = [*out.removed_data_files, *(file_key(d) for d in out.removed_delete_files)]
    targets = frozenset(f.path for f in plan.files)
    planned = plan.snapshot_id

    def validate(base: TableMetadata) -> None:
        _validate_no_conflicting_deletes(table.io, base, branch, planned, targets)

    update = SnapshotUpdate("delete", added=out.added, removed=removed, validate=validate)
    result = commit(
        table, update, branch=branch, faults=faults, sleep=sleep, owned=sorted({f.path for f in out.added})
    )
    return DeleteResult(
        plan.deleted_rows, out.added, out.removed_data_files, out.removed_delete_files, result
    )


def delete_rows(
    table: Table,
    keys: pa.Table,
    on: Sequence[str],
    *,
    branch: str = "main",
    backend: str = "auto",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteResult:
    """Delete the rows whose ``on`` columns equal a row of ``keys`` (NULL matches NULL), as equality delete
    files of the default spec: rows added later with the same key are not deleted. ``deleted_rows`` counts
    the keys written (the rows they match are not counted)."""
    check_committable(table)
    md = table.metadata
    if md.format_version < 2:
        raise ValidationError(f"table {md.location}: format version 1 has no equality deletes")
    if not on or len(set(on)) != len(on):
        raise ValueError(f"on: one or more distinct column names, not {list(on)}")
    missing = [c for c in on if c not in keys.column_names]
    if missing:
        raise SchemaMismatch(f"keys: no column(s) {missing} (columns: {keys.column_names})")
    ids = [md.schema.find_field(c).field_id for c in on]
    if keys.num_rows == 0:
        return DeleteResult(0)
    files = write_equality_deletes(
        table.io, md.location, md.schema, md.spec, md.default_spec_id, keys.select(list(on)), ids,
        properties=md.properties, backend=backend,
    )  # fmt: skip
    update = SnapshotUpdate("delete", added=files)
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in files])
    return DeleteResult(sum(f.record_count for f in files), tuple(files), commit=result)


# -- validation -------------------------------------------------------------------------------------------


def _validate_no_conflicting_deletes(
    io: FileIO, base: TableMetadata, branch: str, planned: int, targets: frozenset[str]
) -> None:
    """:class:`ValidationError` unless the head of ``branch`` descends from ``planned`` and no snapshot
    since removed a targeted data file or added a DV or position delete file that may apply to one."""
    for snap in _since(base, branch, planned):
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
                        f"after this delete was planned on snapshot {planned}"
                    )
                continue
            spec_id = m.partition_spec_id if m.partition_spec_id is not None else 0
            for e in entries_of(table, m, base.spec_by_id(spec_id)):
                if e.snapshot_id != snap.snapshot_id or e.file.content != POSITION_DELETES:
                    continue
                hit = _may_target(e.file, targets)
                if hit is not None:
                    raise ValidationError(
                        f"table {base.location}: snapshot {snap.snapshot_id} added deletes ({e.file.path}) "
                        f"for data file {hit} after this delete was planned on snapshot {planned}"
                    )


def _since(base: TableMetadata, branch: str, planned: int) -> list[Snapshot]:
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
            "this delete was planned"
        )
    return out


def _may_target(f: ContentFile, targets: frozenset[str]) -> str | None:
    """A target the position delete file or DV ``f`` may apply to (by ``referenced_data_file``, else by its
    ``file_path`` bounds; without bounds any target)."""
    if f.referenced_data_file is not None:
        return f.referenced_data_file if f.referenced_data_file in targets else None
    lower, upper = f.lower_bounds.get(_FILE_PATH_ID), f.upper_bounds.get(_FILE_PATH_ID)
    for t in sorted(targets):
        if lower is None or upper is None or lower <= t.encode("utf-8") <= upper:
            return t
    return None
