"""The snapshots an incremental scan covers: those after ``from`` (or from it, inclusive) up to ``to``,
along ``to``'s ancestry, oldest first — Iceberg Java's ``fromSnapshotExclusive`` / ``fromSnapshotInclusive``
/ ``toSnapshot``.

Without ``from`` the range starts at the oldest ancestor of ``to`` still in the table. An exclusive
``from`` may have expired, as in Java, when it is still recorded as the parent of an ancestor of ``to``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import _args
from ..errors import PlanningError
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import Snapshot


@dataclass(frozen=True)
class SnapshotRange:
    """Where an incremental scan starts; where it ends is the scan's snapshot (id, ref or current)."""

    from_snapshot_id: int | None = None
    from_inclusive: bool = False

    def __post_init__(self) -> None:
        _args.boolean(self.from_inclusive, "from_inclusive", PlanningError)  # "no" would be truthy
        if self.from_snapshot_id is not None:
            _args.integer(self.from_snapshot_id, "from_snapshot_id", PlanningError)
        if self.from_inclusive and self.from_snapshot_id is None:
            raise PlanningError("from_inclusive=True needs a from_snapshot_id")


def snapshots_in_range(md: TableMetadata, to: Snapshot, rng: SnapshotRange) -> tuple[Snapshot, ...]:
    """The snapshots of ``rng`` ending at ``to``, oldest first (empty when ``from`` is ``to``, exclusive)."""
    start = rng.from_snapshot_id
    if start is not None and rng.from_inclusive and start not in md.snapshots_by_id:
        raise PlanningError(f"table {md.location}: from snapshot {start} (inclusive) is not in the table")
    newest_first: list[Snapshot] = []
    for snapshot_id in md.ancestor_ids(to.snapshot_id):
        snapshot = md.snapshots_by_id[snapshot_id]
        if snapshot_id == start and not rng.from_inclusive:  # ``to`` is ``from``
            return ()
        newest_first.append(snapshot)
        ends_here = snapshot.parent_snapshot_id == start if not rng.from_inclusive else snapshot_id == start
        if start is not None and ends_here:
            return tuple(reversed(newest_first))
    if start is None:
        return tuple(reversed(newest_first))
    oldest = newest_first[-1]  # ``to`` at least
    if oldest.parent_snapshot_id is not None and oldest.parent_snapshot_id not in md.snapshots_by_id:
        raise PlanningError(
            f"table {md.location}: from snapshot {start} was not reached: the history of snapshot "
            f"{to.snapshot_id} ends at snapshot {oldest.snapshot_id}, whose parent "
            f"{oldest.parent_snapshot_id} was expired; an incremental scan needs every snapshot of its "
            f"range (start from snapshot {oldest.snapshot_id}, inclusive, or later)"
        )
    known = start in md.snapshots_by_id or any(s.parent_snapshot_id == start for s in md.snapshots)
    if not known:  # a typo, or a snapshot expired with its children
        raise PlanningError(
            f"table {md.location}: from snapshot {start} is not in the table (nor the parent of one of its "
            f"snapshots; snapshot ids: {sorted(md.snapshots_by_id)[:10]})"
        )
    raise PlanningError(
        f"table {md.location}: from snapshot {start} is not an ancestor of snapshot {to.snapshot_id}: "
        "an incremental scan follows one line of history"
    )
