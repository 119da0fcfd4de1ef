"""Manifest tables are joined into single-chunk batches of one spec before pruning (``_batches``).

Filtering a table of many chunks with map columns costs per chunk (150 one-entry manifests: 23 ms as
chunks, 1.4 ms combined), which made a changelog over 200 snapshots spend half its planning there.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.planning import scan


def _manifest(spec_id: int, rows: int, start: int = 0) -> pa.Table:
    bounds = pa.array([[(1, b"x")]] * rows, pa.map_(pa.int32(), pa.binary()))
    return pa.table(
        {
            "spec_id": pa.array([spec_id] * rows, pa.int32()),
            "file_path": [f"f{start + i}" for i in range(rows)],
            "lower_bounds": bounds,
        }
    ).replace_schema_metadata({"manifest": "m"})


def test_batches_are_single_chunks_in_order() -> None:
    tables = [_manifest(0, 1, i) for i in range(150)]
    out = list(scan._batches(iter(tables)))
    assert len(out) == 1
    assert all(column.num_chunks == 1 for column in out[0].columns)
    assert out[0].column("file_path").to_pylist() == [f"f{i}" for i in range(150)]
    assert out[0].schema.metadata is None


def test_batches_split_by_spec_and_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "_BATCH_ROWS", 4)
    tables = [_manifest(0, 3), _manifest(0, 0), _manifest(0, 1, 3), _manifest(0, 2, 4), _manifest(1, 1, 6)]
    out = list(scan._batches(iter(tables)))
    assert [t.num_rows for t in out] == [4, 2, 1]
    assert [t.column("spec_id")[0].as_py() for t in out] == [0, 0, 1]
    assert all(c.num_chunks == 1 for t in out for c in t.columns)
