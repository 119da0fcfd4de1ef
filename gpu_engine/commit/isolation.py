"""Isolation levels of row-level changes, Iceberg's ``serializable`` and ``snapshot``.

A delete or an overwrite is planned on one snapshot and may commit on a later one. Under both levels no
data file it targets may have been removed since, nor deletes added for one (:mod:`.validation`). Under
``serializable`` (Iceberg's default) it also fails when a data file that may hold rows matching its filter
was added since by an ``append`` or ``overwrite``: those rows would have been deleted or replaced had the
change run after them. Under ``snapshot`` they are kept.

Deletes read the level from the table property ``write.delete.isolation-level`` (as Spark's Iceberg
writes do); an overwrite takes it as an argument. Files added since are matched to the filter as the scan
planner prunes (partition values and column metrics, inclusively: a file that may match conflicts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..errors import InvalidOption, InvalidProperty, ValidationError
from ..expressions import Expression
from ..iceberg.manifests import ADDED, read_manifest
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..planning.scan import ScanOptions, plan_scan
from .delete_plan import branch_ref
from .entries import snapshot_manifests
from .table_update import parent_of

SERIALIZABLE = "serializable"
SNAPSHOT = "snapshot"
LEVELS = (SERIALIZABLE, SNAPSHOT)
DELETE_ISOLATION_LEVEL = "write.delete.isolation-level"
_ADDING = ("append", "overwrite")  # operations whose added files hold new rows (a replace's do not)


def isolation_level(value: str | None, *, option: str = "isolation_level") -> str:
    """``value`` as one of :data:`LEVELS` (case-insensitive; None: serializable); InvalidOption naming
    ``option``."""
    if value is None:
        return SERIALIZABLE
    level = value.strip().lower()
    if level not in LEVELS:
        raise InvalidOption(f"{option} {value!r}: expected {SERIALIZABLE} or {SNAPSHOT}")
    return level


def delete_isolation_level(props: Mapping[str, str]) -> str:
    """The isolation level of deletes: ``write.delete.isolation-level``; InvalidProperty naming it."""
    try:
        return isolation_level(props.get(DELETE_ISOLATION_LEVEL))
    except InvalidOption:
        raise InvalidProperty(
            f"table property {DELETE_ISOLATION_LEVEL}={props[DELETE_ISOLATION_LEVEL]!r}: expected "
            f"{SERIALIZABLE} or {SNAPSHOT}"
        ) from None


def validate_no_conflicting_data(
    io: FileIO,
    base: TableMetadata,
    branch: str,
    planned: int | None,
    row_filter: str | Expression,
    *,
    action: str,
    case_sensitive: bool = True,
) -> None:
    """:class:`ValidationError` when a snapshot of ``branch`` after ``planned`` (None: the branch's whole
    history) appended data files that may hold rows matching ``row_filter`` (see the module doc)."""
    added: dict[str, int] = {}  # data file path -> the snapshot that added it
    snap = parent_of(base, branch)
    while snap is not None and snap.snapshot_id != planned:
        if snap.operation in _ADDING:
            for m in snapshot_manifests(io, snap):
                if (m.content or 0) != 0 or m.added_snapshot_id != snap.snapshot_id:
                    continue
                resolved = replace(m, manifest_path=io.resolve(m.manifest_path))
                entries = read_manifest(resolved, open_input=io.open_input, columns=())
                for status, sid, path in zip(
                    entries.column("status").to_pylist(),
                    entries.column("snapshot_id").to_pylist(),
                    entries.column("file_path").to_pylist(),
                    strict=True,
                ):
                    if status == ADDED and sid == snap.snapshot_id:
                        added[path] = snap.snapshot_id
        parent = snap.parent_snapshot_id
        snap = None if parent is None else base.snapshots_by_id.get(parent)
    if not added:
        return
    options = ScanOptions(row_filter, ref=branch_ref(base, branch), case_sensitive=case_sensitive)
    for task in plan_scan(base, io, options).tasks:
        if task.file.path in added:
            raise ValidationError(
                f"table {base.location}: snapshot {added[task.file.path]} added data file {task.file.path}, "
                f"which may hold rows matching {action}'s filter, after {action} was planned"
                + ("" if planned is None else f" on snapshot {planned}")
                + f" (isolation level {SERIALIZABLE}; {SNAPSHOT} would keep those rows)"
            )
