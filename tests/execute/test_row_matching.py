"""Rows grouped by equal values, against a plain-Python grouping of the same rows."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from gpu_engine.execute.row_matching import match_rows


@pytest.mark.parametrize("null_type", [pa.null(), pa.struct([("u", pa.null())])])
def test_columns_of_nulls_only_group_every_row_together(null_type: pa.DataType) -> None:
    """A v3 ``unknown`` column (Arrow null type), bare or in a struct, beside repeated rows: the rows group
    by the other columns (Arrow has no comparison of the null type)."""
    left = pa.table({"id": [1, 1, 2], "u": pa.nulls(3, null_type)})
    right = pa.table({"id": [1, 2, 2, 3], "u": pa.nulls(4, null_type)})
    m = match_rows(left, right, ["id", "u"])
    stacked = [*left.column("id").to_pylist(), *right.column("id").to_pylist()]
    groups = {int(g): stacked[int(i)] for g, i in zip(m.group, m.order, strict=True)}
    assert sorted(groups.values()) == [1, 2, 3]
    assert {groups[g]: int(n) for g, n in enumerate(m.left_count)} == dict(
        Counter(left.column("id").to_pylist())
    ) | {3: 0}
    assert {groups[g]: int(n) for g, n in enumerate(m.right_count)} == {1: 1, 2: 2, 3: 1}
