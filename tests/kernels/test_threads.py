"""Kernels launched from several threads at once (a compaction's writer and its read-ahead do that): results
equal one thread's. Under numba's CUDA simulator this needs launches to take turns (KERNEL_LAUNCH)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from gpu_engine import transforms

from ..conftest import BACKENDS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_launches_from_threads(backend: str) -> None:
    words = pa.array([f"{'é' * (i % 4)}w{i}" if i % 7 else None for i in range(40)])
    ids = pa.array(range(-20, 20), pa.int64())
    jobs = [("truncate[2]", "string", words), ("bucket[7]", "long", ids), ("truncate[3]", "long", ids)] * 4
    alone = [transforms.apply(t, kind, values, backend="cpu") for t, kind, values in jobs]
    with ThreadPoolExecutor(len(jobs)) as pool:
        together = list(pool.map(lambda job: transforms.apply(job[0], job[1], job[2], backend=backend), jobs))
    assert together == alone


_WORKQUEUE_CHILD = """
import sys, threading, numba, pyarrow as pa
from gpu_engine import transforms
values = pa.array(range(300_000), pa.int64())  # above PARALLEL_FROM: the parallel loop
expected = transforms.apply("bucket[16]", "long", values, backend="cpu") if sys.argv[1] == "warm" else None
bad = []
def work():
    for _ in range(10):
        got = transforms.apply("bucket[16]", "long", values, backend="cpu")
        if expected is not None and not got.equals(expected):
            bad.append(1)
threads = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print(numba.threading_layer(), len(bad))
"""


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_parallel_loops_from_threads_under_the_workqueue_layer(start: str) -> None:
    """numba's workqueue layer (where neither TBB nor OpenMP loads) aborts the process when two threads
    run parallel loops at once, as a scan's workers do: one scan killed the process with SIGABRT. Loops
    take turns there, also before the first one has told which layer runs ("cold")."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "PYTHONPATH": str(REPO)}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run(
        [sys.executable, "-c", _WORKQUEUE_CHILD, start], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["workqueue", "0"]
