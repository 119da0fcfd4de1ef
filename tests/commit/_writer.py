"""A writer process of the concurrency test (a module of its own so that spawned children import little)."""

from __future__ import annotations

import time

import pyarrow as pa

import gpu_engine as ge


def rows_for(writer: int, commit: int, per_commit: int) -> pa.Table:
    base = (writer * 10_000 + commit) * per_commit
    ids = pa.array(range(base, base + per_commit), pa.int64())
    return pa.table({"id": ids, "writer": pa.array([writer] * per_commit, pa.int32())})


def write(uri: str, warehouse: str, writer: int, commits: int, per_commit: int) -> tuple[int, int, float]:
    """Append ``commits`` batches to ``db.t``; (commits done, attempts in all, seconds)."""
    start = time.monotonic()
    cat = ge.load_catalog("writes", uri=uri, warehouse=warehouse)
    tbl = cat.load_table("db.t")
    attempts = 0
    for i in range(commits):
        attempts += tbl.append(rows_for(writer, i, per_commit)).commit.attempts
    return commits, attempts, time.monotonic() - start
