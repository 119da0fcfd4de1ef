"""Snapshot ranges of incremental scans: ``(from, to]`` and ``[from, to]`` along ``to``'s ancestry, an
expired exclusive ``from`` still recorded as a parent, and clear errors off the line of history."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpu_engine.errors import PlanningError
from gpu_engine.iceberg.metadata import TableMetadata
from gpu_engine.iceberg.snapshots import Snapshot
from gpu_engine.planning.snapshot_range import SnapshotRange, snapshots_in_range

from ..commit._support import region_table, rows


@pytest.fixture
def history(tmp_path: Path) -> tuple[TableMetadata, list[int], int]:
    """Five appends on main (ids oldest first) and a branch ``side`` forked at the second with one more."""
    tbl = region_table(tmp_path, 2)
    for i in range(5):
        tbl.append(rows(i * 10, 10, seed=i))
    md = tbl.metadata
    assert md.current_snapshot_id is not None
    ids = list(reversed(md.ancestor_ids(md.current_snapshot_id)))
    tbl.manage_snapshots().create_branch("side", ids[1]).commit()
    tbl.append(rows(100, 5), branch="side")
    md = tbl.refresh().metadata
    return md, ids, md.refs["side"].snapshot_id


def _ids(snapshots: tuple[Snapshot, ...]) -> list[int]:
    return [s.snapshot_id for s in snapshots]


def test_exclusive_inclusive_and_open_starts(history: tuple[TableMetadata, list[int], int]) -> None:
    md, ids, _ = history
    head = md.snapshot_by_id(ids[-1])
    assert _ids(snapshots_in_range(md, head, SnapshotRange(ids[1]))) == ids[2:]
    assert _ids(snapshots_in_range(md, head, SnapshotRange(ids[1], from_inclusive=True))) == ids[1:]
    assert _ids(snapshots_in_range(md, head, SnapshotRange())) == ids
    assert _ids(snapshots_in_range(md, head, SnapshotRange(ids[-1]))) == []
    assert _ids(snapshots_in_range(md, head, SnapshotRange(ids[-1], from_inclusive=True))) == [ids[-1]]
    assert _ids(snapshots_in_range(md, md.snapshot_by_id(ids[2]), SnapshotRange(ids[0]))) == ids[1:3]


def test_a_branch_ends_its_own_line(history: tuple[TableMetadata, list[int], int]) -> None:
    md, ids, side = history
    assert _ids(snapshots_in_range(md, md.snapshot_by_id(side), SnapshotRange(ids[0]))) == [ids[1], side]
    with pytest.raises(PlanningError, match=f"from snapshot {ids[3]} is not an ancestor of snapshot {side}"):
        snapshots_in_range(md, md.snapshot_by_id(side), SnapshotRange(ids[3]))
    with pytest.raises(PlanningError, match=f"from snapshot {side} is not an ancestor"):
        snapshots_in_range(md, md.snapshot_by_id(ids[-1]), SnapshotRange(side))


def test_an_expired_exclusive_start_still_recorded_as_a_parent(
    history: tuple[TableMetadata, list[int], int],
) -> None:
    md, ids, _ = history
    gone = {ids[0], ids[1]}
    expired = replace(md, snapshots=tuple(s for s in md.snapshots if s.snapshot_id not in gone))
    head = expired.snapshot_by_id(ids[-1])
    assert _ids(snapshots_in_range(expired, head, SnapshotRange(ids[1]))) == ids[2:]
    assert _ids(snapshots_in_range(expired, head, SnapshotRange())) == ids[2:]
    cut = f"from snapshot {ids[0]} was not reached: .* snapshot {ids[2]}, whose parent {ids[1]} was expired"
    with pytest.raises(PlanningError, match=cut):
        snapshots_in_range(expired, head, SnapshotRange(ids[0]))  # expired, and no longer anyone's parent
    with pytest.raises(PlanningError, match=f"from snapshot {ids[1]} \\(inclusive\\) is not in the table"):
        snapshots_in_range(expired, head, SnapshotRange(ids[1], from_inclusive=True))


def test_a_range_through_an_expired_snapshot_names_where_history_ends(
    history: tuple[TableMetadata, list[int], int],
) -> None:
    """The start is older than a snapshot expired from the middle of the line: the error names the
    snapshot whose parent is gone (the start was an ancestor; the range cannot be read)."""
    md, ids, _ = history
    expired = replace(md, snapshots=tuple(s for s in md.snapshots if s.snapshot_id != ids[2]))
    head = expired.snapshot_by_id(ids[-1])
    for start in (SnapshotRange(ids[0]), SnapshotRange(ids[1], from_inclusive=True)):
        with pytest.raises(
            PlanningError, match=f"ends at snapshot {ids[3]}, whose parent {ids[2]} was expired"
        ):
            snapshots_in_range(expired, head, start)
    assert _ids(snapshots_in_range(expired, head, SnapshotRange(ids[2]))) == ids[3:]  # exclusive: still fine


@pytest.mark.parametrize("bad", ["no", 1, None])
def test_inclusive_is_a_bool(bad: object) -> None:
    """A string such as "no" was truthy: the scan included the start snapshot's rows."""
    with pytest.raises(PlanningError, match=r"from_inclusive=.*: expected True or False"):
        SnapshotRange(5, from_inclusive=bad)  # type: ignore[arg-type]


def test_inclusive_needs_a_start() -> None:
    with pytest.raises(PlanningError, match="from_inclusive=True needs a from_snapshot_id"):
        SnapshotRange(None, from_inclusive=True)
