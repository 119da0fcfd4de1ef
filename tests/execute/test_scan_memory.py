"""Streaming keeps memory bounded: a scan's peak Arrow memory follows its largest row groups, not the table.

The table (40 files with deletes) is scanned in a fresh process that drops each batch after counting it;
the process reports the Arrow memory pool's peak and its peak RSS growth. Both must stay a small fraction
of the table's decoded size, which is what makes a scan larger than RAM complete.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .gen_table import generate

_SCAN = textwrap.dedent(
    """
    import json, resource, sys
    import pyarrow as pa
    import gpu_engine as ge

    tbl = ge.load_table(sys.argv[1])
    scan = tbl.scan(backend="cpu")
    list(tbl.scan(backend="cpu", limit=1).to_batches())  # imports and kernel compilation, outside the measure
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    pool = pa.default_memory_pool()
    base_pool = pool.max_memory()
    rows = decoded = 0
    for batch in scan.to_batches():
        rows += batch.num_rows
        decoded += batch.nbytes
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"rows": rows, "decoded": decoded, "pool_peak": pool.max_memory() - base_pool,
                      "rss_growth": peak_rss - base_rss}))
    """
)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    root = tmp_path_factory.mktemp("memory")
    generated = generate(
        root, kind="position", rows=800_000, files=40, delete_fraction=0.05, format_version=2, seed=3
    )
    return generated.metadata_location, generated.expected.num_rows


def test_peak_memory_follows_the_largest_task_not_the_table(table: tuple[str, int]) -> None:
    metadata, expected_rows = table
    out = subprocess.run(
        [sys.executable, "-c", _SCAN, metadata],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["rows"] == expected_rows
    table_bytes = report["decoded"]
    per_file = table_bytes / 40
    # workers (<= 8) x (running task + queued batches) in flight: far below the whole table
    assert report["pool_peak"] < 0.35 * table_bytes, report
    assert report["pool_peak"] < 16 * per_file, report
    assert report["rss_growth"] < 0.5 * table_bytes + 64 * 2**20, report
