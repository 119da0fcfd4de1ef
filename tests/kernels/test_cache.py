"""The kernels' on-disk cache hits across processes, keeps compile options apart and follows every kernel
source file (numba's default key missed our closures in every process and grew the cache without end)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from numba import config, njit

from gpu_engine.kernels import _cache, bucket, elementwise, temporal

REPO = Path(__file__).resolve().parents[2]
_SCRIPT = """
import pyarrow as pa
from gpu_engine import transforms
print(len(transforms.apply("bucket[16]", "long", pa.array(range(50_000), pa.int64()), backend="cpu")))
"""


def _run(cache_dir: Path) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "NUMBA_DEBUG_CACHE": "1"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.skipif(bool(config.DISABLE_JIT), reason="no compiled code to cache")
def test_a_second_process_loads_every_kernel_and_writes_nothing(tmp_path: Path) -> None:
    first = _run(tmp_path)
    files = sorted(p.name for p in tmp_path.rglob("*.nbc"))
    assert "data saved" in first and any("cpu_loop" in f for f in files)
    second = _run(tmp_path)
    assert "data saved" not in second
    assert "data loaded" in second
    assert sorted(p.name for p in tmp_path.rglob("*.nbc")) == files


def _loop(fn: Any) -> Callable[..., None]:
    def cpu_loop(n: int, out: Any, values: Any, param: int) -> None:
        for i in range(n):
            out[i] = fn(values[i], param)

    return cpu_loop


def test_the_key_names_captured_dispatchers_not_their_per_process_identity() -> None:
    hour: Any = temporal._hour
    a = njit(hour.py_func)  # two dispatchers of one function: different uuids
    b = njit(hour.py_func)
    assert _cache.closure_key(_loop(a)) == _cache.closure_key(_loop(b))
    assert _cache.closure_key(_loop(a)) == ("dispatcher gpu_engine.kernels.temporal._hour",)
    assert _cache.closure_key(_loop(a)) != _cache.closure_key(_loop(njit(cast(Any, temporal._day).py_func)))
    assert _cache.closure_key(_loop(3)) == ("int 3",)


def test_parallel_and_serial_loops_do_not_share_entries() -> None:
    kernel = bucket.KERNELS[0]
    parallel, serial = kernel.cpu._cache, kernel.cpu_serial._cache
    assert isinstance(parallel, _cache.KernelCache) and isinstance(serial, _cache.KernelCache)
    codegen = kernel.cpu.targetctx.codegen()
    assert parallel._index_key("sig", codegen) != serial._index_key("sig", codegen)


def test_the_digest_follows_every_source_file(tmp_path: Path) -> None:
    (tmp_path / "scalar").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "scalar" / "b.py").write_text("y = 2\n")
    before = _cache.sources_digest.__wrapped__(tmp_path)
    (tmp_path / "scalar" / "b.py").write_text("y = 3\n")
    assert _cache.sources_digest.__wrapped__(tmp_path) != before
    assert _cache.sources_digest() == _cache.sources_digest.__wrapped__(Path(elementwise.__file__).parent)
