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

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidOption, InvalidProperty, ValidationError
from ..expressions import Expression, parse, rename_by_id
from ..iceberg.manifests import ADDED
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO
from ..planning.scan import ScanOptions, bound_filter, plan_files
from .entries import snapshot_manifests
from .table_update import parent_of

SERIALIZABLE = "serializable"
SNAPSHOT = "snapshot"
LEVELS = (SERIALIZABLE, SNAPSHOT)
DELETE_ISOLATION_LEVEL = "write.delete.isolation-level"
_ADDING = ("append", "overwrite")  # operations whose added files hold new rows (a replace's do not)


def isolation_level(value: object, *, option: str = "isolation_level") -> str:
    """``value`` as one of :data:`LEVELS` (case-insensitive; None: serializable); InvalidOption naming
    ``option``."""
    if value is None:
        return SERIALIZABLE
    if not isinstance(value, str):
        kind = type(value).__name__
        raise InvalidOption(f"{option}={value!r}: expected {SERIALIZABLE!r} or {SNAPSHOT!r}, not {kind}")
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
    schema: Schema | None = None,
) -> None:
    """:class:`ValidationError` when a snapshot of ``branch`` after ``planned`` (None: the branch's whole
    history) appended data files that may hold rows matching ``row_filter`` (see the module doc).
    ``schema``: the one the operation was planned with, whose names the filter's are (default: ``base``'s);
    its columns are found by field id in ``base``'s, so a concurrent rename changes nothing, and a column
    dropped meanwhile fails the validation naming it.

    As Iceberg Java's ``validateAddedDataFiles``, the files are taken from the manifests those snapshots
    wrote, whether or not they are still live: rows appended and then compacted away meanwhile live on in
    the compaction's output."""
    adding: dict[int, Snapshot] = {}
    snap = parent_of(base, branch)
    while snap is not None and snap.snapshot_id != planned:
        if snap.operation in _ADDING:
            adding[snap.snapshot_id] = snap
        parent = snap.parent_snapshot_id
        snap = None if parent is None else base.snapshots_by_id.get(parent)
    written = {
        m.manifest_path: m
        for s in adding.values()
        for m in snapshot_manifests(io, s)
        if (m.content or 0) == 0 and m.added_snapshot_id == s.snapshot_id
    }
    if not written:
        return
    expr = parse(row_filter) if isinstance(row_filter, str) else row_filter
    if schema is not None:
        expr, dropped = rename_by_id(expr, schema, base.schema, case_sensitive=case_sensitive)
        if dropped:
            raise ValidationError(
                f"table {base.location}: column {dropped[0].name!r} (field id {dropped[0].field_id}) of "
                f"{action}'s filter was dropped by a schema change after {action} was planned: the rows "
                "appended since cannot be checked against it"
            )
    bound = bound_filter(base, base.schema, ScanOptions(expr, case_sensitive=case_sensitive))
    head = parent_of(base, branch)
    assert head is not None  # it has adding ancestors
    ids = pa.array(sorted(adding), pa.int64())
    added_in: dict[str, int] = {}  # file path -> the snapshot that added it

    def added_by_them(entries: pa.Table) -> pa.Table:
        mine = pc.is_in(entries.column("snapshot_id"), value_set=ids)
        kept = entries.filter(pc.and_(pc.equal(entries.column("status"), ADDED), mine))
        added_in.update(zip(kept["file_path"].to_pylist(), kept["snapshot_id"].to_pylist(), strict=True))
        return kept

    plan = plan_files(
        base, io, head.snapshot_id, base.schema, bound, list(written.values()), None, added_by_them
    )
    if plan.tasks:
        path = plan.tasks[0].file.path
        raise ValidationError(
            f"table {base.location}: snapshot {added_in.get(path)} added data file {path}, which may hold "
            f"rows matching {action}'s filter, after {action} was planned"
            + ("" if planned is None else f" on snapshot {planned}")
            + f" (isolation level {SERIALIZABLE}; {SNAPSHOT} would keep those rows)"
        )
