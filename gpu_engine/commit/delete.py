"""Deletes by filter: :func:`delete` (rows matching a filter; equality deletes by key are
:mod:`.equality_delete`'s).

:func:`delete` plans on the branch head (:func:`~gpu_engine.commit.delete_plan.plan_row_deletes`) and, by
the table's ``write.delete.mode`` (:mod:`.delete_cow`), either writes delete files once
(:func:`~gpu_engine.commit.delete_plan.write_row_deletes`: position delete files in v2, deletion vectors in
v3; a ``delete`` snapshot) or rewrites the matched data files without the matched rows (copy-on-write; an
``overwrite`` snapshot), and commits with a validation that every attempt re-runs on the refreshed table:
since the planned snapshot no targeted data file may have been removed; on v3 tables no DV may have been
added for one (it would end up with two); copy-on-write, no delete file at all that may apply to one
(deleted rows would come back); an overwrite (:mod:`.overwrite`) replacing rows, no delete file either, as
Java's row deltas for UPDATE and MERGE validate (a row replaced by it may have been deleted or upserted
meanwhile). v2 position delete files stack: a delete's and another's of the same data file both apply, as
Java's merge-on-read DELETE allows. Under the table's
``write.delete.isolation-level`` ``serializable`` (the default) no data file that may hold matching rows
may have been appended either (:mod:`.isolation`). A violation is a
:class:`~gpu_engine.errors.ValidationError`; the files this delete wrote are deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..expressions import Expression
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.metadata_columns import has_lineage
from ..iceberg.partitioning import PartitionKey, partition_key
from .delete_cow import COPY_ON_WRITE, delete_mode, write_copy_on_write
from .delete_plan import plan_row_deletes, write_row_deletes
from .isolation import SERIALIZABLE, delete_isolation_level, isolation_level, validate_no_conflicting_data
from .producer import check_committable, commit
from .removal_scope import RemovalScope
from .update import (
    CommitResult,
    Faults,
    Operation,
    Removed,
    SnapshotUpdate,
    Validation,
    file_key,
)
from .validation import validate_lineage_kept, validate_no_new_deletes

if TYPE_CHECKING:
    from ..table import Table


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


@dataclass(frozen=True)
class PreparedDelete:
    """A delete by filter planned on snapshot ``planned`` (None: an empty table) with its files written
    (delete files, or the rewritten data files when ``copy_on_write``), not committed yet. ``targets``: the
    data files with matching rows (recorded paths); ``removed_from``: the manifests that can list the
    removed files."""

    planned: int | None
    deleted_rows: int
    copy_on_write: bool
    targets: frozenset[str]
    partitions: Mapping[str, PartitionKey] = field(default_factory=dict)  # of the targets
    added: tuple[ContentFile, ...] = ()
    removed_data_files: tuple[str, ...] = ()
    removed_delete_files: tuple[ContentFile, ...] = ()
    removed_from: RemovalScope | None = None
    read_lineage: bool = False  # the planned rows have row lineage (copy-on-write copies it)

    @property
    def removed(self) -> list[Removed]:
        return [*self.removed_data_files, *(file_key(d) for d in self.removed_delete_files)]

    def validation(
        self,
        table: Table,
        branch: str,
        filter: str | Expression,
        *,
        isolation: str,
        action: str,
        case_sensitive: bool = True,
        replacing: bool = False,
    ) -> Validation:
        """The check every commit attempt runs (see the module doc and :mod:`.isolation`); ``replacing``:
        the commit adds rows replacing the deleted ones (an overwrite)."""
        io, planned, targets = table.io, self.planned, self.targets
        every_delete = self.copy_on_write or replacing
        schema = table.metadata.schema  # the filter's names are those of the schema it was planned with

        def validate(base: TableMetadata) -> None:
            if self.copy_on_write and self.added:
                validate_lineage_kept(base, branch, planned, self.read_lineage, action=action)
            if planned is not None and targets:
                validate_no_new_deletes(
                    io, base, branch, planned, targets, action=action,
                    positional=every_delete or base.format_version >= 3, equality=every_delete,
                    partitions=self.partitions,
                )  # fmt: skip
            if isolation == SERIALIZABLE:
                validate_no_conflicting_data(
                    io,
                    base,
                    branch,
                    planned,
                    filter,
                    action=action,
                    case_sensitive=case_sensitive,
                    schema=schema,
                )

        return validate


def prepare_delete(
    table: Table,
    filter: str | Expression,
    *,
    branch: str = "main",
    backend: str = "auto",
    case_sensitive: bool = True,
) -> PreparedDelete:
    """Plan deleting the rows of ``branch`` matching ``filter`` and write its files, by the table's
    ``write.delete.mode`` (:mod:`.delete_cow`); nothing is written when no row matches."""
    md = table.metadata
    cow = delete_mode(md.properties, md.format_version, md.location) == COPY_ON_WRITE
    plan = plan_row_deletes(
        table, filter, backend=backend, case_sensitive=case_sensitive, branch=branch, remove_all=cow
    )
    if not plan.files:
        return PreparedDelete(plan.snapshot_id, 0, cow, frozenset())
    out = write_copy_on_write(table, plan, backend=backend) if cow else write_row_deletes(table, plan)
    targets = frozenset(f.path for f in plan.files)
    removed = frozenset(out.removed_data_files)
    scope = RemovalScope.of_files(
        md, data=(f for f in plan.files if f.path in removed), deletes=out.removed_delete_files
    )
    partitions = {f.path: partition_key(f.spec_id, f.partition) for f in plan.files}
    return PreparedDelete(
        plan.snapshot_id, plan.deleted_rows, cow, targets, partitions, out.added, out.removed_data_files,
        out.removed_delete_files, scope, has_lineage(md, md.snapshots_by_id.get(plan.snapshot_id or -1)),
    )  # fmt: skip


def delete(
    table: Table,
    filter: str | Expression,
    *,
    branch: str = "main",
    backend: str = "auto",
    case_sensitive: bool = True,
    isolation: str | None = None,
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteResult:
    """Delete the rows of ``branch`` matching ``filter`` (data files left without live rows are removed);
    see the module doc. ``isolation``: ``serializable`` or ``snapshot`` (default: the table's
    ``write.delete.isolation-level``)."""
    check_committable(table)
    md = table.metadata
    level = (
        delete_isolation_level(md.properties)
        if isolation is None
        else isolation_level(isolation, option="isolation")
    )
    if branch == "main" and md.current_snapshot() is None:
        return DeleteResult(0)  # an empty table: nothing can match
    prepared = prepare_delete(table, filter, branch=branch, backend=backend, case_sensitive=case_sensitive)
    if not prepared.targets:
        return DeleteResult(0)
    validate = prepared.validation(
        table, branch, filter, isolation=level, action="this delete", case_sensitive=case_sensitive
    )
    operation: Operation = "overwrite" if prepared.copy_on_write and prepared.added else "delete"
    update = SnapshotUpdate(
        operation, added=prepared.added, removed=prepared.removed, validate=validate,
        removed_from=prepared.removed_from,
    )  # fmt: skip
    owned = sorted({f.path for f in prepared.added})
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=owned)
    return DeleteResult(
        prepared.deleted_rows, prepared.added, prepared.removed_data_files, prepared.removed_delete_files,
        result,
    )  # fmt: skip
