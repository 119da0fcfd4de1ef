"""Changelog planning: the row changes each snapshot of a range made, deletes of every kind included.

Iceberg Java's ``IncrementalChangelogScan`` refuses snapshots with delete files; this one does not. Each
snapshot ``S`` of the range (oldest first; ``replace`` snapshots change no rows and are passed over, as in
Java) is compared with its parent ``P`` file by file, each side planned as a scan of that snapshot with its
deletes (an ``append``'s side as its parent's and the files it added, planned alone):

- a data file live in ``S`` only: its rows alive in ``S`` are INSERTs (:attr:`ChangeTask.added`);
- a data file live in ``P`` only: its rows alive in ``P`` are DELETEs (:attr:`ChangeTask.removed`);
- a data file live in both whose applicable deletes differ (a position delete, DV or equality delete
  added, or a DV replaced): rows alive in ``P`` but not in ``S`` are DELETEs, and rows alive in ``S`` but
  not in ``P`` INSERTs (:attr:`ChangeTask.changed`; execution compares the two sides by row position).

So the changes of ``S`` are exactly the difference of the two snapshots' rows, whatever wrote them
(merge-on-read, copy-on-write, Flink upserts). Rows are read in the current schema. ``_change_ordinal``
counts the range's non-``replace`` snapshots from 0. When the first snapshot's parent has expired, a v2+
``append`` is still listed (its added files, which carry its sequence number); anything else is an error
naming the snapshot to start after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import MetadataError, PlanningError
from ..expressions import Expression
from ..iceberg import types as it
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO
from ..tasks import ScanTask
from .appends import appended_manifests
from .scan import ScanOptions, bound_filter, plan_files, plan_snapshot, select_snapshot
from .snapshot_manifests import ManifestCache
from .snapshot_range import SnapshotRange, snapshots_in_range

INSERT, DELETE = "INSERT", "DELETE"


@dataclass(frozen=True)
class ChangeTask:
    """One data file's change in one snapshot: ``before`` reads its rows alive in the parent (with the
    parent's deletes), ``after`` its rows alive in the snapshot; an empty side means the file is not live
    there. Both set: the file's deletes changed."""

    ordinal: int
    snapshot_id: int
    path: str
    before: tuple[ScanTask, ...]
    after: tuple[ScanTask, ...]

    @property
    def added(self) -> bool:
        return not self.before

    @property
    def removed(self) -> bool:
        return not self.after

    @property
    def changed(self) -> bool:
        return bool(self.before) and bool(self.after)


@dataclass(frozen=True)
class ChangelogPlan:
    schema: Schema
    filter: Expression
    snapshot_ids: tuple[int, ...]  # the range's snapshots with changes considered, oldest first
    skipped: tuple[int, ...]  # its replace snapshots
    tasks: tuple[ChangeTask, ...]  # by ordinal, then file path


_FileState = dict[str, tuple[ScanTask, ...]]
_StateOf = Callable[[Snapshot], _FileState]


def plan_changelog(md: TableMetadata, io: FileIO, options: ScanOptions, rng: SnapshotRange) -> ChangelogPlan:
    """The changes of the snapshots of ``rng`` ending at ``options``' snapshot (id, ref or current)."""
    if options.as_of is not None:
        raise PlanningError("a changelog ends at a snapshot id or a ref, not at a time (as_of)")
    schema = md.schema
    row_filter = bound_filter(md, schema, options)
    to = select_snapshot(md, options)
    if to is None:
        if rng.from_snapshot_id is not None:
            raise PlanningError(f"table {md.location} has no snapshots: no changes since a snapshot")
        return ChangelogPlan(schema, row_filter, (), (), ())
    chain = snapshots_in_range(md, to, rng)
    if not chain:
        return ChangelogPlan(schema, row_filter, (), (), ())

    cache = ManifestCache()  # consecutive snapshots share most manifests: each is read once

    def state(snapshot: Snapshot) -> _FileState:
        return _by_file(plan_snapshot(md, io, snapshot, schema, row_filter, options.max_workers, cache).tasks)

    def appended(snapshot: Snapshot, before: _FileState) -> _FileState:
        """An append's state: its parent's and the files it added, planned alone (no delete can apply
        to them: the deletes before have lower sequence numbers, and an append adds none); the table is
        not planned again for every append of the range."""
        manifests, added = appended_manifests(md, io, snapshot, SnapshotRange(snapshot.snapshot_id, True))
        plan = plan_files(
            md,
            io,
            snapshot.snapshot_id,
            schema,
            row_filter,
            manifests,
            options.max_workers,
            added,
            cache=cache,
        )
        out = dict(before)
        for path, ts in _by_file(plan.tasks).items():
            out[path] = ts
        return out

    before = _parent_state(md, chain[0], state)
    tasks: list[ChangeTask] = []
    changed_ids: list[int] = []
    skipped: list[int] = []
    for snapshot in chain:
        after = appended(snapshot, before) if snapshot.operation == "append" else state(snapshot)
        if snapshot.operation == "replace":
            skipped.append(snapshot.snapshot_id)
        else:
            _check_long(md, snapshot.snapshot_id)
            tasks.extend(_changes(len(changed_ids), snapshot.snapshot_id, before, after))
            changed_ids.append(snapshot.snapshot_id)
        before = after
    return ChangelogPlan(schema, row_filter, tuple(changed_ids), tuple(skipped), tuple(tasks))


def _by_file(tasks: Sequence[ScanTask]) -> _FileState:
    out: dict[str, list[ScanTask]] = {}
    for task in tasks:
        out.setdefault(task.file.path, []).append(task)
    return {path: tuple(ts) for path, ts in out.items()}


def _check_long(md: TableMetadata, snapshot_id: int) -> None:
    if not it.LONG_RANGE[0] <= snapshot_id <= it.LONG_RANGE[1]:
        raise MetadataError(
            f"table {md.location}: snapshot id {snapshot_id} does not fit a long (Iceberg's ids are 64-bit "
            "signed integers), so it cannot be a _commit_snapshot_id"
        )


def _parent_state(md: TableMetadata, first: Snapshot, state: _StateOf) -> _FileState:
    """The file state before ``first``: its parent's; for an expired parent, when ``first`` is a v2+
    ``append`` (it only added data files), ``first``'s own state without the files it added (those
    carry its sequence number, unique from v2 on: not 0, which files written before an upgrade from
    v1 share), as Java's changelog lists an append's added files alone."""
    parent = first.parent_snapshot_id
    if parent is None:
        return {}
    if parent in md.snapshots_by_id:
        return state(md.snapshots_by_id[parent])
    if md.format_version >= 2 and first.operation == "append" and first.sequence_number > 0:
        own = first.sequence_number
        return {p: ts for p, ts in state(first).items() if ts[0].file.data_sequence_number != own}
    raise PlanningError(
        f"table {md.location}: the changes of snapshot {first.snapshot_id} ({first.operation}) are "
        f"relative to its parent {parent}, which has expired: start the changelog after snapshot "
        f"{first.snapshot_id}"
    )


def _changes(ordinal: int, snapshot_id: int, before: _FileState, after: _FileState) -> list[ChangeTask]:
    out = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path, ()), after.get(path, ())
        if old and new and _same_deletes(old[0], new[0]):
            continue  # same file, same deletes: no row changed
        out.append(ChangeTask(ordinal, snapshot_id, path, old, new))
    return out


def _same_deletes(a: ScanTask, b: ScanTask) -> bool:
    """Whether two plans of one data file carry the same delete files (counted first: a Flink table's
    files gain deletes with every commit and carry thousands)."""
    if a.deletes is b.deletes:
        return True
    if len(a.deletes) != len(b.deletes):
        return False
    return {(d.path, d.content_offset) for d in a.deletes} == {(d.path, d.content_offset) for d in b.deletes}


def change_counts(tasks: Sequence[ChangeTask]) -> dict[str, int]:
    """How many files were added, removed and had their deletes changed."""
    return {
        "added": sum(t.added for t in tasks),
        "removed": sum(t.removed for t in tasks),
        "changed": sum(t.changed for t in tasks),
    }
