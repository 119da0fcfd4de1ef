"""Delete files are loaded once per scan and released after their last task."""

from __future__ import annotations

import threading
import time

import pytest

from gpu_engine.execute.shared_loads import SharedLoads


def test_loaded_once_under_concurrency_and_released_after_last_user() -> None:
    loads = SharedLoads[int](["a"] * 8 + ["b"])
    calls = 0
    lock = threading.Lock()

    def load() -> int:
        nonlocal calls
        with lock:
            calls += 1
        time.sleep(0.02)
        return 42

    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(loads.get("a", load))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [42] * 8
    assert calls == 1
    assert len(loads) == 1
    for _ in range(7):
        loads.release("a")
    assert len(loads) == 1
    loads.release("a")
    assert len(loads) == 0


def test_failed_load_raises_for_every_caller_and_is_not_cached() -> None:
    loads = SharedLoads[int](["k", "k"])

    def broken() -> int:
        raise OSError("disk gone")

    for _ in range(2):
        with pytest.raises(OSError, match="disk gone"):
            loads.get("k", broken)
    assert loads.get("k", lambda: 7) == 7
    assert loads.loads == 1
