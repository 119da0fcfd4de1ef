"""Row deletes: :func:`delete` (rows matching a filter) and :func:`delete_rows` (equality delete files).

:func:`delete` plans on the branch head (:func:`~gpu_engine.commit.delete_plan.plan_row_deletes`) and, by
the table's ``write.delete.mode`` (:mod:`.delete_cow`), either writes delete files once
(:func:`~gpu_engine.commit.delete_plan.write_row_deletes`: position delete files in v2, deletion vectors in
v3; a ``delete`` snapshot) or rewrites the matched data files without the matched rows (copy-on-write; an
``overwrite`` snapshot), and commits with a validation that every attempt re-runs on the refreshed table:
since the planned snapshot no targeted data file may have been removed and no DV or position delete file
(copy-on-write: no delete file at all) may have been added for one (the positions written would be stale,
a data file would end up with two DVs, or deleted rows would come back); under the table's
``write.delete.isolation-level`` ``serializable`` (the default) no data file that may hold matching rows
may have been appended either (:mod:`.isolation`). :func:`delete_rows` writes equality deletes in the specs
of the live data files and fails if files of another spec were committed meanwhile. A violation is a
:class:`~gpu_engine.errors.ValidationError`; the files this delete wrote are deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import InvalidOption, SchemaMismatch, ValidationError
from ..expressions import Expression
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..io.equality_delete_write import write_equality_deletes
from ..io.fileio import FileIO
from .delete_cow import COPY_ON_WRITE, delete_mode, write_copy_on_write
from .delete_plan import plan_row_deletes, write_row_deletes
from .entries import snapshot_manifests
from .isolation import SERIALIZABLE, delete_isolation_level, validate_no_conflicting_data
from .producer import check_committable, commit, delete_files
from .table_update import parent_of
from .update import CommitResult, Faults, Operation, Removed, SnapshotUpdate, Validation, file_key
from .validation import validate_no_new_deletes

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
    data files with matching rows (recorded paths)."""

    planned: int | None
    deleted_rows: int
    copy_on_write: bool
    targets: frozenset[str]
    added: tuple[ContentFile, ...] = ()
    removed_data_files: tuple[str, ...] = ()
    removed_delete_files: tuple[ContentFile, ...] = ()

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
    ) -> Validation:
        """The check every commit attempt runs (see the module doc and :mod:`.isolation`)."""
        io, planned, targets = table.io, self.planned, self.targets

        def validate(base: TableMetadata) -> None:
            if planned is not None and targets:
                equality = self.copy_on_write
                validate_no_new_deletes(io, base, branch, planned, targets, action=action, equality=equality)
            if isolation == SERIALIZABLE:
                validate_no_conflicting_data(
                    io, base, branch, planned, filter, action=action, case_sensitive=case_sensitive
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
    return PreparedDelete(
        plan.snapshot_id, plan.deleted_rows, cow, targets, out.added, out.removed_data_files,
        out.removed_delete_files,
    )  # fmt: skip


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
    """Delete the rows of ``branch`` matching ``filter`` (data files left without live rows are removed);
    see the module doc."""
    check_committable(table)
    md = table.metadata
    isolation = delete_isolation_level(md.properties)
    if branch == "main" and md.current_snapshot() is None:
        return DeleteResult(0)  # an empty table: nothing can match
    prepared = prepare_delete(table, filter, branch=branch, backend=backend, case_sensitive=case_sensitive)
    if not prepared.targets:
        return DeleteResult(0)
    validate = prepared.validation(
        table, branch, filter, isolation=isolation, action="this delete", case_sensitive=case_sensitive
    )
    operation: Operation = "overwrite" if prepared.copy_on_write and prepared.added else "delete"
    update = SnapshotUpdate(operation, added=prepared.added, removed=prepared.removed, validate=validate)
    owned = sorted({f.path for f in prepared.added})
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=owned)
    return DeleteResult(
        prepared.deleted_rows, prepared.added, prepared.removed_data_files, prepared.removed_delete_files,
        result,
    )  # fmt: skip


def delete_rows(
    table: Table,
    keys: pa.Table,
    on: Sequence[str] | None = None,
    *,
    branch: str = "main",
    backend: str = "auto",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteResult:
    """Delete the rows whose ``on`` columns (default: the table's identifier fields) equal a row of ``keys``
    (NULL matches NULL), as equality delete files in the specs :func:`delete_specs` names (the keys need the
    partition columns of each, unless the table has an unpartitioned spec to write global deletes in); rows
    added later with the same key are not deleted. ``deleted_rows`` counts the keys (the rows they match are
    not counted)."""
    check_committable(table)
    md = table.metadata
    if md.format_version < 2:
        raise ValidationError(
            f"table {md.location}: format version 1 has no equality deletes (upgrade it: "
            "tbl.update_properties().set('format-version', '2'))"
        )
    on = key_columns(md, keys, on, what="keys")
    ids = [md.schema.find_field(c).field_id for c in on]
    if keys.num_rows == 0:
        return DeleteResult(0)
    files: list[ContentFile] = []
    specs = delete_specs(table, branch, ids)
    try:
        for spec_id in specs:
            files += write_equality_deletes(
                table.io, md.location, md.schema, md.spec_by_id(spec_id), spec_id, keys.select(list(on)), ids,
                properties=md.properties, backend=backend,
            )  # fmt: skip
    except BaseException:
        delete_files(table.io, [f.path for f in files], fault=None)
        raise
    update = SnapshotUpdate("delete", added=files, validate=same_delete_specs(table, branch, ids, specs))
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in files])
    return DeleteResult(keys.num_rows, tuple(files), commit=result)


def key_columns(md: TableMetadata, rows: pa.Table, on: Sequence[str] | None, *, what: str) -> list[str]:
    """The key columns ``on`` of an equality delete or upsert (default: the table's identifier fields),
    checked distinct and present in ``rows`` (called ``what`` in errors)."""
    if on is None:
        on = [md.schema.names_by_id[i] for i in md.schema.identifier_field_ids]
        if not on:
            raise InvalidOption(f"on: table {md.location} has no identifier fields; name the key columns")
    keys = list(on)
    if not keys or len(set(keys)) != len(keys):
        raise InvalidOption(f"on: one or more distinct column names, not {keys}")
    missing = [c for c in keys if c not in rows.column_names]
    if missing:
        raise SchemaMismatch(f"{what}: no column(s) {missing} (columns: {rows.column_names})")
    return keys


def same_delete_specs(table: Table, branch: str, key_ids: Collection[int], written: list[int]) -> Validation:
    """The check of an equality delete's commit: the specs it must be written in (:func:`delete_specs`) are
    still ``written`` on the refreshed table, else rows of a spec added meanwhile would escape it."""

    def validate(base: TableMetadata) -> None:
        now = specs_for_deletes(base, table.io, branch, key_ids)
        missing = sorted(set(now) - set(written))
        if missing:
            raise ValidationError(
                f"table {base.location}: data files of partition spec(s) {missing} were committed after "
                f"this equality delete was written in spec(s) {written}; its keys would not reach their rows"
            )

    return validate


def delete_specs(table: Table, branch: str, key_ids: Collection[int] | None = None) -> list[int]:
    """:func:`specs_for_deletes` of the table's current metadata."""
    return specs_for_deletes(table.metadata, table.io, branch, key_ids)


def specs_for_deletes(
    md: TableMetadata, io: FileIO, branch: str, key_ids: Collection[int] | None = None
) -> list[int]:
    """The specs equality deletes are written in so that they reach every live row: an equality delete of a
    partitioned spec applies only to data files of that spec (spec "Scan Planning"), one of an unpartitioned
    spec to every data file. The default spec when it is unpartitioned; else an unpartitioned spec of the
    live data files; else the default spec and each spec of the live data files (after partition evolution,
    files of older specs would be missed), unless the keys (field ids ``key_ids``) lack a partition column
    of one of them and the table has an unpartitioned spec: then that one."""
    if md.spec.is_unpartitioned:
        return [md.default_spec_id]
    parent = parent_of(md, branch)
    manifests = () if parent is None else snapshot_manifests(io, parent)
    live = {
        m.partition_spec_id if m.partition_spec_id is not None else 0
        for m in manifests
        if m.content == 0 and (m.added_files_count != 0 or m.existing_files_count != 0)
    }
    specs = sorted({md.default_spec_id, *live})
    unpartitioned = [s for s in specs if md.spec_by_id(s).is_unpartitioned]
    if unpartitioned:
        return unpartitioned[:1]
    sources = {
        i for s in specs for f in md.spec_by_id(s).fields if f.transform != "void" for i in f.source_ids
    }
    global_specs = [s.spec_id for s in md.partition_specs if s.is_unpartitioned]
    if key_ids is not None and not sources <= set(key_ids) and global_specs:
        return global_specs[:1]
    return specs
