"""Commit rewritten file groups as one ``replace`` snapshot (compaction's commit).

The new files keep the data sequence number the compaction read at (``use-starting-sequence-number``,
the default), so equality deletes committed meanwhile still apply to the rewritten rows. The replaced
data files are removed together with their file-scoped deletes (DVs, position delete files of one data
file) and with the position delete files all of whose live data files are replaced by now
(:func:`dropped_keys`): those would dangle, still applying by sequence number to the new files (which
keep the old data sequence number) though they name none of them. Validation (:mod:`.validation`), on
every attempt: since the planned snapshot no replaced file was removed and no DV or position delete was
added for one; with a new sequence number (``use-starting-sequence-number=false``) no equality delete
either.

:func:`conflicting_groups` checks groups one by one before the commit, so one group that lost a race
fails alone while the others commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import ValidationError
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import partition_key
from ..io.paths import normalize
from ..planning.compaction import CompactionPlan
from ..tasks import DeleteFile, FileGroup, RewriteResult
from .producer import commit, delete_files
from .removal_scope import RemovalScope
from .update import CommitResult, Faults, FileKey, SnapshotUpdate
from .validation import Respec, validate_lineage_kept, validate_no_new_deletes

if TYPE_CHECKING:
    from ..table import Table


def dropped_deletes(group: FileGroup) -> tuple[DeleteFile, ...]:
    """The deletes that apply only to files of ``group``: its DVs and position delete files that name
    their one data file (``referenced_data_file``)."""
    paths = {normalize(f.path) for f in group.files}  # another writer may spell the path another way
    return tuple(
        d
        for d in group.delete_files
        if d.content == 1
        and d.referenced_data_file is not None
        and normalize(d.referenced_data_file) in paths
    )


def dropped_keys(
    plan: CompactionPlan, groups: Sequence[FileGroup], replaced_before: Collection[str] = ()
) -> list[FileKey]:
    """The delete files a commit of ``groups`` removes: their file-scoped deletes, and the position delete
    files every live data file of which is replaced by now (``replaced_before``: by earlier commits of the
    same compaction)."""
    keys = {(d.path, d.content_offset) for g in groups for d in dropped_deletes(g)}
    replaced = {f.path for g in groups for f in g.files} | set(replaced_before)
    attached = {(d.path, d.content_offset) for g in groups for d in g.delete_files}
    for key, targets in plan.position_delete_targets:
        if key in attached and targets <= replaced:
            keys.add(key)
    return sorted(keys, key=repr)


def _validate(
    table: Table,
    plan: CompactionPlan,
    groups: Sequence[FileGroup],
    base: TableMetadata,
    own: Collection[int] = (),
    read: dict[str, pa.Table] | None = None,
) -> None:
    if plan.snapshot_id is None:
        return
    validate_lineage_kept(base, plan.branch, plan.snapshot_id, plan.read_lineage, action="this compaction")
    targets = frozenset(f.path for g in groups for f in g.files)
    kept = plan.options.use_starting_sequence_number
    (output_spec_id,) = {g.output_spec_id for g in groups} or {0}
    respec = Respec(output_spec_id, {f.path: f.spec_id for g in groups for f in g.files}) if kept else None
    partitions = {f.path: partition_key(f.spec_id, f.partition) for g in groups for f in g.files}
    validate_no_new_deletes(
        table.io, base, plan.branch, plan.snapshot_id, targets, action="this compaction", equality=not kept,
        partitions=partitions, respec=respec, own=own, read=read,
    )  # fmt: skip


def conflicting_groups(
    table: Table, plan: CompactionPlan, groups: Sequence[FileGroup], own: Collection[int] = ()
) -> dict[int, ValidationError]:
    """The groups (by index) that would fail validation on the table's current metadata (``own``: the
    compaction's earlier commits)."""
    out: dict[int, ValidationError] = {}
    read: dict[str, pa.Table] = {}  # each manifest read once for all the groups
    for g in groups:
        try:
            _validate(table, plan, [g], table.metadata, own, read)
        except ValidationError as exc:
            out[g.index] = exc
    return out


def _update(
    table: Table,
    plan: CompactionPlan,
    done: Sequence[tuple[FileGroup, RewriteResult]],
    added: list[ContentFile],
    replaced_before: Collection[str],
    own: Collection[int],
) -> SnapshotUpdate:
    """The ``replace`` of ``done``'s files by ``added``, validated against the plan at commit time."""
    targets = frozenset(f.path for g, _ in done for f in g.files)
    removed: list[str | FileKey] = sorted(targets)
    dropped = dropped_keys(plan, [g for g, _ in done], replaced_before)
    removed += dropped
    gone = set(dropped)
    scope = RemovalScope.of_files(
        table.metadata,
        data=(f for g, _ in done for f in g.files),
        deletes=(d for g, _ in done for d in g.delete_files if (d.path, d.content_offset) in gone),
    )

    def validate(base: TableMetadata) -> None:
        _validate(table, plan, [g for g, _ in done], base, own)

    # 0 too (a snapshot written before a v1 table's upgrade): kept explicitly, as Java writes it; _validate
    # skips the equality-delete check because the new files keep it
    seq = plan.starting_sequence_number if plan.options.use_starting_sequence_number else None
    return SnapshotUpdate(
        "replace", added=added, removed=removed, validate=validate, data_sequence_number=seq,
        removed_from=scope,
    )  # fmt: skip


def commit_rewrite(
    table: Table,
    plan: CompactionPlan,
    done: Sequence[tuple[FileGroup, RewriteResult]],
    *,
    replaced_before: Collection[str] = (),
    own: Collection[int] = (),
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> CommitResult:
    """Commit the rewritten groups ``done`` in one ``replace`` snapshot (see the module doc); on a definite
    failure their files are deleted, on an unknown commit state kept. ``replaced_before``: data files
    earlier commits of the same compaction replaced (see :func:`dropped_keys`)."""
    added = [f for _, r in done for f in r.added]
    try:  # a failure before the commit starts is a definite one too: the new files go
        update = _update(table, plan, done, added, replaced_before, own)
    except Exception:
        delete_files(table.io, [f.path for f in added], fault=None)
        raise
    return commit(
        table, update, branch=plan.branch, faults=faults, sleep=sleep, owned=[f.path for f in added]
    )
