"""Every real v1 and v2 fixture table, copied and upgraded to format version 3, then compacted: the rows stay
exactly the fixture's, and the first v3 snapshot gives every row a unique ``_row_id`` (spec "Row Lineage for
Upgraded Tables": existing data manifests get a ``first_row_id`` when the manifest list is written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..execute.oracles import assert_same_rows
from ..execute.test_fixture_scans import ENGINE_CANNOT
from ..planning._support import FIXTURES, MISSING, SHARED, inventory_paths, load
from ._fixture_copy import committable_copy, tree_state
from .test_compact_fixtures import COMPACT_CANNOT, OPTIONS

TABLES = inventory_paths()


@pytest.mark.parametrize("rel", TABLES)
def test_upgraded_to_v3_and_compacted_keeps_rows_and_assigns_row_ids(rel: str, tmp_path: Path) -> None:
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    if rel in ENGINE_CANNOT or rel in COMPACT_CANNOT:
        pytest.skip("the engine refuses to read or rewrite this table (tested where refused)")
    fixture_state = tree_state(SHARED / rel)
    tbl = committable_copy(rel, tmp_path / "table")
    if tbl.metadata.format_version >= 3 or tbl.metadata.current_snapshot_id is None:
        pytest.skip("already v3, or no current snapshot")
    expected = load(rel).scan().to_arrow()
    tbl.update_properties().set("format-version", "3").commit()
    assert (tbl.metadata.format_version, tbl.metadata.next_row_id) == (3, 0)
    assert_same_rows(tbl.scan().to_arrow(), expected, context=f"{rel}: upgraded")
    result = tbl.compact(options=OPTIONS, backend="cpu")
    assert not result.failures, result.failures
    assert_same_rows(tbl.scan().to_arrow(), expected, context=f"{rel}: upgraded and compacted")
    ids = tbl.scan(columns=["_row_id"]).to_arrow()["_row_id"]
    assert ids.null_count == 0 and len(set(ids.to_pylist())) == len(ids), rel
    assert tbl.metadata.next_row_id is not None and tbl.metadata.next_row_id >= len(ids)
    assert tree_state(SHARED / rel) == fixture_state
