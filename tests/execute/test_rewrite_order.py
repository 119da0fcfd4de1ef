"""The order of a rewrite holds at most its memory budget of Arrow data: the rows and their ordered copy,
half the budget each, in memory or range by range through spill files."""

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

    total, budget, batch_rows = int(sys.argv[1]), int(sys.argv[2]), 16_384
    arrow_schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    schema = schema_from_arrow(arrow_schema)
    order = SortOrder(1, (SortField((1,), "identity", "asc", "nulls-first"),))
    rng = np.random.default_rng(7)

    def batches():
        for start in range(0, total // 16, batch_rows):
            k = rng.integers(0, 1 << 40, batch_rows)
            yield pa.record_batch([pa.array(k), pa.array(np.arange(start, start + batch_rows))], arrow_schema)

    pool = pa.default_memory_pool()
    base = pool.max_memory()
    rows, last, ok = 0, -1, True
    for batch in ordered(batches(), RewriteStrategy("sort", order), schema, arrow_schema, backend="cpu",
                         budget_bytes=budget, expected_rows=total // 16):
        k = batch.column(0).to_numpy()
        ok = ok and bool(k[0] >= last) and bool(np.all(k[1:] >= k[:-1]))
        last, rows = int(k[-1]), rows + batch.num_rows
    print(json.dumps({"rows": rows, "sorted": ok, "pool_peak": pool.max_memory() - base}))
    """
)


@pytest.mark.parametrize("share", [0.3, 0.8, 3.0], ids=["in-memory", "just-over-half", "spilled"])
def test_ordering_holds_no_more_than_its_budget(share: float) -> None:
    """Rows of ``share`` x the budget, sorted: in order, and the Arrow pool's peak within the budget (a
    group of 0.8 budgets was held twice over, its rows and their sorted copy, and a spilled range up to
    three times: read, concatenated by the take, sorted)."""
    budget = 24 << 20
    total = int(share * budget) // (16 * 16_384) * 16 * 16_384
    out = subprocess.run(
        [sys.executable, "-c", _ORDER, str(total), str(budget)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["rows"] == total // 16 and report["sorted"], report
    assert report["pool_peak"] <= 1.1 * budget, report  # ranges from a sample: some a little over a third
