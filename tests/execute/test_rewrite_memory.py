"""A rewrite streams: its memory follows the output file size, not the group (issue target: peak RSS
<= 2 x target file size + 300 MB whatever the group size).

One 40-file group is rewritten in a fresh process by :func:`rewrite_group` with a small target file size:
binpack streams batches into the writer; sort with a memory budget of one output file goes through spill
files. Both must keep the Arrow pool's peak a small fraction of the group's decoded size, and the peak RSS
growth within the issue's bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .gen_table import generate

TARGET = 4 << 20
# The writer holds the row group it fills plus those being encoded (up to one per core, within the target
# file size): row groups small against the group, as they are in real rewrites (128 MiB in a group of up
# to 100 GiB), so the Arrow pool's peak tells streaming from holding the group.
ROW_GROUP = 1 << 20

_REWRITE = textwrap.dedent(
    """
    import dataclasses, json, resource, sys
    import pyarrow as pa
    import gpu_engine as ge
    from gpu_engine.commit.compact import resolve_strategy
    from gpu_engine.execute.rewrite import rewrite_group
    from gpu_engine.planning.compaction import plan_compaction
    from gpu_engine.planning.rewrite_options import RewriteOptions

    path, strategy, target, ROW_GROUP = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    tbl = ge.load_table(path)
    md = dataclasses.replace(tbl.metadata, properties={**tbl.metadata.properties,
                             "write.parquet.row-group-size-bytes": str(ROW_GROUP)})
    how = resolve_strategy(tbl, strategy, "category DESC, value" if strategy == "sort" else None)
    options = RewriteOptions.resolve({"rewrite-all": "true", "target-file-size-bytes": str(target),
                                      "max-file-group-size-bytes": str(1 << 40)}, tbl.properties)
    plan = plan_compaction(md, tbl.io, strategy=how, options=options)
    (group,) = plan.groups
    list(tbl.scan(backend="cpu", limit=1).to_batches())  # imports and kernel compilation, outside the measure
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    pool = pa.default_memory_pool()
    base_pool = pool.max_memory()
    result = rewrite_group(md, tbl.io, group, how, backend="cpu", memory_budget_bytes=target)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"rows": result.rows_written, "files": len(result.added),
                      "decoded": sum(b.nbytes for b in tbl.scan(backend="cpu").to_batches()),
                      "pool_peak": pool.max_memory() - base_pool, "rss_growth": peak_rss - base_rss}))
    """
)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    root = tmp_path_factory.mktemp("rewrite-memory")
    generated = generate(
        root, kind="position", rows=800_000, files=40, delete_fraction=0.05, format_version=2, seed=5
    )
    return generated.metadata_location, generated.expected.num_rows


@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_rewrite_memory_follows_the_output_file_not_the_group(table: tuple[str, int], strategy: str) -> None:
    metadata, expected_rows = table
    out = subprocess.run(
        [sys.executable, "-c", _REWRITE, metadata, strategy, str(TARGET), str(ROW_GROUP)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["rows"] == expected_rows
    assert report["files"] > 1, report
    assert report["pool_peak"] < 0.5 * report["decoded"], report
    assert report["rss_growth"] < 2 * TARGET + 300 * 2**20, report
