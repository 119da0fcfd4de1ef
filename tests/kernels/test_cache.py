"""The kernels' loops leave nothing on disk: numba's cache of a closure over a dispatcher never hits (the
dispatcher pickles with a per-process uuid), so ``cache=True`` on them added files in every process without
end; the scalar functions (plain functions) are cached by numba as usual."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from numba import config

REPO = Path(__file__).resolve().parents[2]
_SCRIPT = """
import pyarrow as pa
from gpu_engine import transforms
ids = pa.array(range(50_000), pa.int64())
got = transforms.apply("bucket[16]", "long", ids, backend="cpu").to_pylist()
print(got[:3], len(got))
"""


def _run(cache_dir: Path) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    argv = [sys.executable, "-c", _SCRIPT]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(bool(config.DISABLE_JIT), reason="nothing is compiled")
def test_processes_add_no_cache_files_after_the_first(tmp_path: Path) -> None:
    first = _run(tmp_path)
    files = sorted(p.name for p in tmp_path.rglob("*.nbc"))
    assert files and not [f for f in files if "cpu_loop" in f]  # scalars cached, loops not
    assert _run(tmp_path) == first
    assert sorted(p.name for p in tmp_path.rglob("*.nbc")) == files
