"""The order of a rewrite holds at most its memory budget of Arrow data: the rows and their ordered copy,
half the budget each, in memory or range by range through spill files, whatever the ties of the keys."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_ORDER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import pyarrow as pa
    from gpu_engine.commit.schema_from_arrow import schema_from_arrow
    from gpu_engine.execute.rewrite_order import ordered
    from gpu_engine.iceberg.sorting import SortField, SortOrder
    from gpu_engine.tasks import RewriteStrategy

    total, budget, keys, batch_rows = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], 16_384
    arrow_schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    schema = schema_from_arrow(arrow_schema)
    order = SortOrder(1, (SortField((1,), "identity", "asc", "nulls-first"),))
    rng = np.random.default_rng(7)

    def batches():
        for start in range(0, total // 16, batch_rows):
            k = pa.array(rng.integers(0, 1 << 40, batch_rows))
            if keys == "constant":
                k = pa.array(np.full(batch_rows, 7))
            elif keys == "three-values":
                k = pa.array(rng.integers(0, 3, batch_rows))
            elif keys == "mostly-null":
                k = pa.array(rng.integers(0, 1 << 40, batch_rows), mask=rng.random(batch_rows) < 0.9)
            yield pa.record_batch([k, pa.array(np.arange(start, start + batch_rows))], arrow_schema)

    pool = pa.default_memory_pool()
    base = pool.max_memory()
    rows, last, ok = 0, (-2, -1), True
    for batch in ordered(batches(), RewriteStrategy("sort", order), schema, arrow_schema, backend="cpu",
                         budget_bytes=budget, expected_rows=total // 16):
        k = batch.column(0).fill_null(-1).to_numpy()  # nulls first, before the values (>= 0)
        v = batch.column(1).to_numpy()  # the input order: equal keys keep it (a stable sort)
        k, v = np.concatenate([[last[0]], k]), np.concatenate([[last[1]], v])
        ok = ok and bool(np.all((k[1:] > k[:-1]) | ((k[1:] == k[:-1]) & (v[1:] > v[:-1]))))
        last, rows = (int(k[-1]), int(v[-1])), rows + batch.num_rows
    print(json.dumps({"rows": rows, "sorted": ok, "pool_peak": pool.max_memory() - base}))
    """
)


@pytest.mark.parametrize(
    ("share", "keys"),
    [(0.3, "distinct"), (0.8, "distinct"), (3.0, "distinct"), (3.0, "constant"), (3.0, "three-values"),
     (3.0, "mostly-null")],
    ids=["in-memory", "just-over-half", "spilled", "spilled-constant", "spilled-three-values",
         "spilled-mostly-null"],
)  # fmt: skip
def test_ordering_holds_no_more_than_its_budget(share: float, keys: str) -> None:
    """Rows of ``share`` x the budget, sorted: in order, and the Arrow pool's peak within the budget (a
    group of 0.8 budgets was held twice over, its rows and their sorted copy, and a spilled range up to
    three times: read, concatenated by the take, sorted). Keys with few distinct values made runs of
    equal boundaries whose tied rows all went to one range, read whole: 3 budgets of a constant key
    peaked at 6 budgets."""
    budget = 24 << 20
    total = int(share * budget) // (16 * 16_384) * 16 * 16_384
    out = subprocess.run(
        [sys.executable, "-c", _ORDER, str(total), str(budget), keys],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["rows"] == total // 16 and report["sorted"], report
    assert report["pool_peak"] <= 1.1 * budget, report  # ranges from a sample: some a little over a third
