"""Kernels launched from several threads at once (a compaction's writer and its read-ahead do that): results
equal one thread's. Under numba's CUDA simulator this needs launches to take turns (KERNEL_LAUNCH)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from gpu_engine import transforms

from ..conftest import BACKENDS


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_launches_from_threads(backend: str) -> None:
    words = pa.array([f"{'é' * (i % 4)}w{i}" if i % 7 else None for i in range(40)])
    ids = pa.array(range(-20, 20), pa.int64())
    jobs = [("truncate[2]", "string", words), ("bucket[7]", "long", ids), ("truncate[3]", "long", ids)] * 4
    alone = [transforms.apply(t, kind, values, backend="cpu") for t, kind, values in jobs]
    with ThreadPoolExecutor(len(jobs)) as pool:
        together = list(pool.map(lambda job: transforms.apply(job[0], job[1], job[2], backend=backend), jobs))
    assert together == alone
