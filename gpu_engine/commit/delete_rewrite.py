"""Rewriting delete files without touching data files, as ``replace`` snapshots:
:func:`rewrite_position_deletes` and :func:`convert_equality_deletes`.

:func:`rewrite_position_deletes` (Iceberg's ``rewrite_position_delete_files``): per partition, the
position delete files and DVs that apply to its data files are read and written again, keeping only the
positions that still apply (positions of removed data files, or of data files written after the delete,
are dropped): one position delete file per partition on v2 tables, one DV per data file on v3 tables
(position delete files become DVs). A partition is rewritten when it has at least ``min-input-files``
positional delete files and more than one (v2: one file alone would be written again as it is), or, on
v3, any position delete file or a data file with more than one positional delete; ``rewrite-all`` takes
every partition. Delete files that apply to no live data file (dangling) are removed.

:func:`convert_equality_deletes`: the rows the equality deletes remove are found by reading the data files
they apply to with only those deletes applied (the key match runs as a kernel on the chosen backend); their
positions become DVs (v3, merged with the file's DV and position deletes) or position delete files (v2),
and the equality delete files are removed. Reads then no longer join on keys.

A delete file is removed only when every live data file it applies to gets its positions in this commit.
Validation, on every attempt: no targeted data file removed and no DV or position delete added for one
since the planned snapshot (:mod:`.validation`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _args
from ..errors import InvalidOption
from ..expressions import TRUE
from ..iceberg.content_file import ContentFile
from ..iceberg.partitioning import partition_key
from ..io.paths import normalize
from ..planning.scan import ScanOptions, plan_scan
from ..tasks import EQUALITY_DELETES, POSITION_DELETES, DeleteFile, ScanPlan, ScanTask
from .dangling import dangling_deletes
from .delete_plan import (
    FileRowDeletes,
    Positions,
    RowDeletes,
    existing_deletes,
    positions_by_file,
    scan_positions,
)
from .delete_plan import write_row_deletes as write_deletes
from .producer import check_committable, commit
from .table_update import require_branch
from .update import CommitResult, Faults, FileKey, SnapshotUpdate, deletes_only
from .validation import validate_no_new_deletes

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class DeleteRewriteResult:
    """What a delete-file rewrite did: delete files removed (rewritten, converted or dangling) and added,
    the data files whose deletes were rewritten, and its commit (None: nothing to do)."""

    removed_delete_files: tuple[FileKey, ...] = ()
    added_delete_files: tuple[ContentFile, ...] = ()
    data_files: int = 0
    dangling_removed: int = 0
    commit: CommitResult | None = None


def rewrite_position_deletes(
    table: Table,
    *,
    options: Mapping[str, Any] | None = None,
    branch: str = "main",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteRewriteResult:
    """Rewrite the position delete files and DVs of ``branch`` (see the module doc)."""
    check_committable(table)
    require_branch(table.metadata, branch, "rewrite_position_deletes")
    rewrite_all, min_input = _options(options)
    plan = _plan(table, branch)
    if plan is None:
        return DeleteRewriteResult()
    files = _first_tasks(plan, lambda d: d.content == POSITION_DELETES)
    v3 = table.metadata.format_version >= 3
    chosen: list[ScanTask] = []
    for tasks in _by_partition(files).values():
        positional = {(d.path, d.content_offset) for t in tasks for d in t.deletes if d.content == 1}
        wanted = (
            rewrite_all
            or (not v3 and len(positional) > 1 and len(positional) >= min_input)  # Java: one file stays
            or (v3 and any(not d.is_deletion_vector for t in tasks for d in t.deletes if d.content == 1))
            or (v3 and any(sum(d.content == 1 for d in t.deletes) > 1 for t in tasks))
        )
        if wanted:
            chosen.extend(tasks)
    existing, _ = existing_deletes(table.io, chosen)
    return _commit(table, plan, branch, chosen, existing, {}, faults, sleep, equality=False)


def convert_equality_deletes(
    table: Table,
    *,
    branch: str = "main",
    backend: str = "auto",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeleteRewriteResult:
    """Turn the equality deletes of ``branch`` into DVs (v3) or position deletes (v2); see the module doc."""
    check_committable(table)
    require_branch(table.metadata, branch, "convert_equality_deletes")
    plan = _plan(table, branch)
    if plan is None:
        return DeleteRewriteResult()
    files = _first_tasks(plan, lambda d: d.content == EQUALITY_DELETES)
    paths = {t.file.path for t in files}
    eq_only = tuple(
        replace(t, deletes=tuple(d for d in t.deletes if d.content == EQUALITY_DELETES), residual=TRUE)
        for t in plan.tasks
        if t.file.path in paths
    )
    md, io = table.metadata, table.io
    kept = positions_by_file(scan_positions(md, io, replace(plan, tasks=eq_only), backend, True))
    found: dict[str, Positions] = {}
    for t in files:
        everything = np.arange(t.file.record_count, dtype=np.int64)
        found[t.file.path] = np.setdiff1d(
            everything, kept.get(t.file.path, everything[:0]), assume_unique=True
        )
    existing, _ = existing_deletes(io, files)
    return _commit(table, plan, branch, files, existing, found, faults, sleep, equality=True)


# -- shared -----------------------------------------------------------------------------------------------


def _options(options: Mapping[str, Any] | None) -> tuple[bool, int]:
    given = dict(_args.mapping(options, "options", InvalidOption))
    unknown = sorted(set(given) - {"rewrite-all", "min-input-files"})
    if unknown:
        raise InvalidOption(
            f"position delete rewrite option(s) {unknown} are not supported "
            "(known: min-input-files, rewrite-all)"
        )
    rewrite_all = str(given.get("rewrite-all", "false")).strip().lower()
    if rewrite_all not in ("true", "false"):
        raise InvalidOption(f"option rewrite-all={given['rewrite-all']!r}: expected true or false")
    raw = str(given.get("min-input-files", "5")).strip()
    if not raw.isdigit() or not 1 <= int(raw) <= _args.JAVA_INT_MAX:  # Java parses an int
        raise InvalidOption(
            f"option min-input-files={given['min-input-files']!r}: expected an integer in "
            f"1..{_args.JAVA_INT_MAX}"
        )
    return rewrite_all == "true", int(raw)


def _plan(table: Table, branch: str) -> ScanPlan | None:
    md = table.metadata
    if md.format_version < 2 or branch not in md.refs:
        return None
    return plan_scan(md, table.io, ScanOptions(ref=branch))


def _first_tasks(plan: ScanPlan, wanted: Callable[[DeleteFile], bool]) -> list[ScanTask]:
    """One task per data file that has a delete ``wanted`` (the tasks of a file share its deletes)."""
    out: dict[str, ScanTask] = {}
    for t in plan.tasks:
        if t.file.path not in out and any(wanted(d) for d in t.deletes):
            out[t.file.path] = t
    return list(out.values())


def _by_partition(tasks: Sequence[ScanTask]) -> dict[Any, list[ScanTask]]:
    out: dict[Any, list[ScanTask]] = {}
    for t in tasks:
        out.setdefault(partition_key(t.file.spec_id, t.file.partition), []).append(t)
    return out


def _commit(
    table: Table,
    plan: ScanPlan,
    branch: str,
    chosen: Sequence[ScanTask],
    existing: dict[str, Positions],
    found: dict[str, Positions],
    faults: Faults | None,
    sleep: Callable[[float], None],
    *,
    equality: bool,
) -> DeleteRewriteResult:
    md = table.metadata
    v3 = md.format_version >= 3
    covered = {normalize(t.file.path) for t in chosen}
    live = {normalize(t.file.path) for t in plan.tasks}
    applies: dict[FileKey, tuple[int, set[str]]] = {}  # delete -> (content, live data files it applies to)
    for t in plan.tasks:
        for d in t.deletes:
            applies.setdefault((d.path, d.content_offset), (d.content, set()))[1].add(normalize(t.file.path))
    # the kind rewritten; on v3 also the DVs and position files the new DVs supersede
    kinds = {EQUALITY_DELETES, POSITION_DELETES} if equality and v3 else {EQUALITY_DELETES if equality else 1}
    removed = {
        k for k, (content, targets) in applies.items() if content in kinds and targets & live <= covered
    }
    dangling = dangling_deletes(table, branch)
    rows: list[FileRowDeletes] = []
    for t in chosen:
        old = existing[t.file.path]
        new = found[t.file.path] if equality else old
        merged = np.union1d(old, new) if equality else old
        if not len(merged) or (not v3 and not len(new)):
            continue
        rows.append(
            FileRowDeletes(
                t.file.path, t.file.spec_id, t.file.partition, t.file.record_count,
                t.file.data_sequence_number, new_positions=merged if v3 else new, existing_positions=old,
                merged_positions=merged, applied=(), replaced=(), live_rows=t.file.record_count - len(old),
                fully_deleted=False, task=t,
            )
        )  # fmt: skip
    drop = sorted({*removed, *dangling}, key=repr)
    if not rows and not drop:
        return DeleteRewriteResult()
    written = write_deletes(
        table,
        RowDeletes(plan.summary.snapshot_id, md.format_version, TRUE, tuple(rows)),
        remove_fully_deleted=False,
    )
    targets = frozenset(t.file.path for t in chosen)
    planned = plan.summary.snapshot_id
    assert planned is not None

    def validate(base: Any) -> None:
        validate_no_new_deletes(table.io, base, branch, planned, targets, action="this delete rewrite")

    update = SnapshotUpdate(
        "replace", added=written.added, removed=drop, validate=validate, removed_from=deletes_only(md)
    )
    result = commit(
        table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in written.added]
    )
    return DeleteRewriteResult(tuple(drop), written.added, len(chosen), len(dangling), result)
