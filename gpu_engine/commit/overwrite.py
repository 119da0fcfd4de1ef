"""Overwrites: the rows matching a filter replaced by new rows in one ``overwrite`` snapshot (Iceberg's
``OverwriteFiles``; PyIceberg's ``overwrite``; Spark's ``INSERT OVERWRITE ... WHERE``).

The matching rows are deleted as :func:`~.delete.delete` deletes them (the table's ``write.delete.mode``:
delete files, or data files rewritten without them; files left empty are removed) and the new rows are
written as an append writes them (:func:`gpu_engine.io.parquet_write.write_table_data`: current schema,
default spec, write properties). Both go into one snapshot, so readers see the old rows or the new ones,
never both or neither. Each attempt validates as a delete does, at the isolation level given
(:mod:`.isolation`; ``serializable`` by default: rows matching the filter appended meanwhile fail it).

If the commit finally fails every file it wrote is deleted; if its outcome is unknown they are kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..expressions import TRUE, Expression
from ..iceberg.content_file import DATA, ContentFile
from ..io.parquet_write import Data, write_table_data
from .delete import prepare_delete
from .isolation import isolation_level
from .producer import check_committable, commit, delete_files
from .update import CommitResult, Faults, SnapshotUpdate

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class OverwriteResult:
    """An overwrite that landed: the rows it deleted and added, the data files holding the new rows, the
    files written for the deleted rows (delete files, or rewritten data files), what it removed, and its
    commit."""

    deleted_rows: int
    added_rows: int
    files: tuple[ContentFile, ...]
    delete_side: tuple[ContentFile, ...]
    removed_data_files: tuple[str, ...]
    removed_delete_files: tuple[ContentFile, ...]
    commit: CommitResult

    @property
    def snapshot_id(self) -> int:
        return self.commit.snapshot_id


def overwrite(
    table: Table,
    data: Data,
    filter: str | Expression = TRUE,
    *,
    branch: str = "main",
    backend: str = "auto",
    case_sensitive: bool = True,
    isolation: str | None = None,
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> OverwriteResult:
    """Replace the rows of ``branch`` matching ``filter`` (default: every row) by ``data`` (an Arrow table,
    batch, reader or iterable of batches); see the module doc. ``isolation``: ``serializable`` (default)
    or ``snapshot``."""
    check_committable(table)
    level = isolation_level(isolation, option="isolation")
    md, io = table.metadata, table.io
    if faults is not None:
        faults("data")
    prepared = prepare_delete(table, filter, branch=branch, backend=backend, case_sensitive=case_sensitive)
    try:
        files = write_table_data(io, md, data, backend=backend)
    except BaseException:
        delete_files(io, [f.path for f in prepared.added], fault=None)
        raise
    validate = prepared.validation(
        table,
        branch,
        filter,
        isolation=level,
        action="this overwrite",
        case_sensitive=case_sensitive,
        replacing=True,
    )
    added = (*prepared.added, *files)
    update = SnapshotUpdate(
        "overwrite",
        added=added,
        removed=prepared.removed,
        validate=validate,
        removed_from=prepared.removed_from,
    )
    owned = sorted({f.path for f in added})
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=owned)
    return OverwriteResult(
        deleted_rows=prepared.deleted_rows,
        added_rows=sum(f.record_count for f in files if f.content == DATA),
        files=tuple(files),
        delete_side=prepared.added,
        removed_data_files=prepared.removed_data_files,
        removed_delete_files=prepared.removed_delete_files,
        commit=result,
    )
