"""Remove delete files that no longer apply to any live data file (``remove-dangling-deletes``).

A live delete file is dangling when the scan planner attaches it to no live data file of the branch
head: a DV or file-scoped position delete whose data file is gone; a position delete file whose
partition holds only data written after it (data sequence number greater than the delete's); an
equality delete whose partition (or table, for global ones) holds only data of its sequence number or
later, or whose key columns' metrics rule out every older data file there
(:mod:`gpu_engine.planning.equality_pruning`). They are removed in one ``replace`` snapshot: no row
changes. The commit is validated against concurrent writers: any snapshot since the head it was computed
on other than an ``append`` (whose new files carry new, higher sequence numbers that no existing delete
can reach) fails it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import ValidationError
from ..iceberg.metadata import TableMetadata
from ..planning.scan import ScanOptions, plan_scan
from .entries import live_entries, snapshot_manifests
from .producer import commit
from .update import CommitResult, Faults, FileKey, SnapshotUpdate, deletes_only
from .validation import snapshots_since

if TYPE_CHECKING:
    from ..table import Table


def dangling_deletes(table: Table, branch: str = "main") -> list[FileKey]:
    """The live delete files of ``branch``'s head that apply to no live data file, as :data:`FileKey`."""
    md = table.metadata
    if branch not in md.refs:
        return []
    head = md.snapshot_for_ref(branch)
    attached: set[FileKey] = set()
    plan = plan_scan(md, table.io, ScanOptions(ref=branch))
    for t in plan.tasks:
        attached.update((d.path, d.content_offset) for d in t.deletes)
    live: list[FileKey] = []
    for m in snapshot_manifests(table.io, head):
        if not m.is_delete_manifest:
            continue
        spec_id = m.partition_spec_id if m.partition_spec_id is not None else 0
        for e in live_entries(table.io, m, md.spec_by_id(spec_id)):
            live.append((e.file.path, e.file.content_offset))
    return sorted({k for k in live if k not in attached}, key=repr)


def remove_dangling_deletes(
    table: Table,
    *,
    branch: str = "main",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, CommitResult | None]:
    """Remove the dangling delete files of ``branch`` (see the module doc): (how many, the commit or None)."""
    md = table.metadata
    if branch not in md.refs:
        return 0, None
    planned = md.snapshot_for_ref(branch).snapshot_id
    removed = dangling_deletes(table, branch)
    if not removed:
        return 0, None

    def validate(base: TableMetadata) -> None:
        for snap in snapshots_since(base, branch, planned, action="removing dangling deletes"):
            operation = (snap.summary or {}).get("operation")
            if operation == "replace":  # its files may keep an older data sequence number, which a
                # delete found dangling applies to; appends, deletes and overwrites add newer ones
                raise ValidationError(
                    f"table {base.location}: snapshot {snap.snapshot_id} ({operation}) was committed after "
                    f"the dangling deletes were found on snapshot {planned}"
                )

    update = SnapshotUpdate("replace", removed=removed, validate=validate, removed_from=deletes_only(md))
    return len(removed), commit(table, update, branch=branch, faults=faults, sleep=sleep)
