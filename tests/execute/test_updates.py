"""Update pairing on its own: pairs ordered by key, each UPDATE_BEFORE directly before its UPDATE_AFTER,
null keys equal to null keys, unpaired rows left as they were, an ambiguous key refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import InvalidData
from gpu_engine.execute.updates import pair_updates


def _side(kind: str, keys: list[int | None], values: list[str]) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": values, "_change_type": [kind] * len(keys)})


def test_pairs_by_key_with_nulls_equal() -> None:
    deleted = _side("DELETE", [5, None, 1, 7], ["old5", "oldnull", "old1", "old7"])
    inserted = _side("INSERT", [1, 9, None, 5], ["new1", "new9", "newnull", "new5"])
    rest_d, updates, rest_i = pair_updates(deleted, inserted, ["k"], snapshot_id=1)
    assert rest_d.to_pydict()["v"] == ["old7"] and rest_i.to_pydict()["v"] == ["new9"]
    assert list(zip(updates["_change_type"].to_pylist(), updates["v"].to_pylist(), strict=True)) == [
        ("UPDATE_BEFORE", "old1"), ("UPDATE_AFTER", "new1"),
        ("UPDATE_BEFORE", "old5"), ("UPDATE_AFTER", "new5"),
        ("UPDATE_BEFORE", "oldnull"), ("UPDATE_AFTER", "newnull"),
    ]  # fmt: skip


def test_one_side_empty_and_ambiguous_keys() -> None:
    deleted = _side("DELETE", [1], ["a"])
    empty = deleted.slice(0, 0)
    assert pair_updates(deleted, empty, ["k"], snapshot_id=1)[0].num_rows == 1
    twice = _side("INSERT", [1, 1], ["b", "c"])
    with pytest.raises(
        InvalidData, match=r"snapshot 7 deleted or inserted more than one row with identifier \{'k': 1\}"
    ):
        pair_updates(deleted, twice, ["k"], snapshot_id=7)
    other = _side("INSERT", [2, 2], ["b", "c"])  # a repeated key inserted only: plain INSERTs
    assert pair_updates(deleted, other, ["k"], snapshot_id=7)[2].num_rows == 2
