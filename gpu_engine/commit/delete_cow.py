"""Copy-on-write deletes, Iceberg's ``write.delete.mode=copy-on-write``: the data files holding rows that
match the filter are rewritten without them, instead of getting delete files.

The mode (:func:`delete_mode`): the table property when set; otherwise merge-on-read on v2 and v3 tables
and copy-on-write on v1 tables, which have no delete files (merge-on-read asked of a v1 table is refused).

Rows are found as merge-on-read deletes find them (:func:`~.delete_plan.plan_row_deletes`: the live rows
matching the filter, every delete that applies now applied). Each data file with a match is read again
with its deletes applied, the matched positions left out, and the rest written with the table's current
spec and write properties (:func:`gpu_engine.execute.copy_on_write.rewrite_without`; v3 rows keep their
row lineage). The commit removes those data files, their DVs and the position delete files whose every
target is removed, and adds the new files: an ``overwrite`` snapshot (``delete`` when every matched file
was emptied and nothing is added). The new files take the new snapshot's sequence number, so validation
on every attempt refuses any delete file added since the plan for a rewritten file, equality deletes
included (they would not apply to the new files: their rows would come back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidProperty, UnsupportedFeature
from ..execute.copy_on_write import rewrite_without
from ..iceberg.content_file import ContentFile
from .delete_plan import RowDeletes

if TYPE_CHECKING:
    from ..table import Table

COPY_ON_WRITE = "copy-on-write"
MERGE_ON_READ = "merge-on-read"
DELETE_MODE = "write.delete.mode"


def delete_mode(props: Mapping[str, str], format_version: int, location: str = "") -> str:
    """How ``tbl.delete`` deletes rows (see the module doc); InvalidProperty naming a bad value."""
    raw = props.get(DELETE_MODE)
    if raw is None:
        return MERGE_ON_READ if format_version >= 2 else COPY_ON_WRITE
    mode = raw.strip().lower()
    if mode not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise InvalidProperty(
            f"table property {DELETE_MODE}={raw!r}: expected {COPY_ON_WRITE} or {MERGE_ON_READ}"
        )
    if mode == MERGE_ON_READ and format_version < 2:
        raise UnsupportedFeature(
            f"table {location}: {DELETE_MODE}={raw} needs delete files, which format version 1 lacks "
            "(upgrade it: tbl.update_properties().set('format-version', '2'), or remove the property)"
        )
    return mode


@dataclass(frozen=True)
class CopyOnWriteFiles:
    """The data files a copy-on-write delete wrote, and what its commit removes (recorded paths; DVs as
    entries, identified by path and offset)."""

    added: tuple[ContentFile, ...]
    removed_data_files: tuple[str, ...]
    removed_delete_files: tuple[ContentFile, ...]


def write_copy_on_write(table: Table, deletes: RowDeletes, *, backend: str = "auto") -> CopyOnWriteFiles:
    """Rewrite the data files of ``deletes`` (planned with ``remove_all``) without their matched rows;
    files left without rows are only removed."""
    rewritten = [f for f in deletes.files if not f.fully_deleted]
    drop = {f.task.file.path: f.new_positions for f in rewritten}
    added = (
        rewrite_without(table.metadata, table.io, [f.task for f in rewritten], drop, backend=backend)
        if rewritten
        else ()
    )
    dropped = {(d.path, d.content_offset): d for f in deletes.files for d in f.replaced}
    return CopyOnWriteFiles(added, tuple(f.path for f in deletes.files), tuple(dropped.values()))
