"""bench/frame_stages.py finds the table bench/scan.py cached last."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "frame_stages.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("frame_stages", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


stages = _load()


def test_the_newest_cached_table_of_the_kind_is_taken(tmp_path: Path) -> None:
    for i, (run, kind) in enumerate([("scan-r1-f1-s1", "position-0.05"), ("scan-r2-f2-s1", "position-0.05"),
                                     ("scan-r3-f3-s1", "dv-0.05")]):  # fmt: skip
        meta = tmp_path / run / kind / "meta.json"
        meta.parent.mkdir(parents=True)
        meta.write_text(json.dumps({"metadata_location": f"/tables/{run}/{kind}.json"}))
        os.utime(meta, (1_000 + i, 1_000 + i))
    assert stages.scan_table("position", tmp_path) == "/tables/scan-r2-f2-s1/position-0.05.json"
    assert stages.scan_table("dv", tmp_path) == "/tables/scan-r3-f3-s1/dv-0.05.json"
    with pytest.raises(SystemExit, match="no equality table cached"):
        stages.scan_table("equality", tmp_path)


@pytest.mark.parametrize("piped", [False, True], ids=["calling-thread", "pipelined"])
def test_the_batch_variants_read_the_rows_of_the_scan(tmp_path: Path, piped: bool) -> None:
    """The experiment's variants (smaller decoder calls, tasks prepared on one thread ahead) read what
    the scan reads, in order, and leave the module's defaults as they were."""
    import pyarrow as pa

    import gpu_engine as ge
    from gpu_engine.execute import frame_scan
    from gpu_engine.execute.frames import ArrowFrames

    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    tbl = cat.create_table(
        "db.t", pa.schema([pa.field("id", pa.int64())]), properties={"format-version": "2"}
    )
    for k in range(5):
        tbl.append(pa.table({"id": pa.array(range(k * 10, k * 10 + 10), pa.int64())}))
    tbl.delete("id in (3, 13, 24, 40)")
    expected = tbl.scan().to_arrow()
    default_batch, default_frames = frame_scan.BATCH_FILES, frame_scan._frames
    with stages.batches(2), stages.pipelined(piped):
        assert frame_scan.BATCH_FILES == 2
        got = tbl.scan().to_frame(ArrowFrames(), host_decode=False)
    assert got.equals(expected)
    assert (frame_scan.BATCH_FILES, frame_scan._frames) == (default_batch, default_frames)
