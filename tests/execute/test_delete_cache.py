"""The delete files a job's executions keep for each other: least recently used dropped first, nothing
above the entry size kept, each value loaded once while kept."""

from __future__ import annotations

import threading

import pytest

from gpu_engine.execute.delete_cache import DeleteCache


def _size(value: bytes) -> int:
    return len(value)


def test_kept_values_are_not_loaded_again() -> None:
    cache = DeleteCache(max_total_bytes=100, max_entry_bytes=100)
    calls: list[str] = []

    def load(key: str) -> bytes:
        calls.append(key)
        return key.encode() * 10

    assert cache.get("a", lambda: load("a"), _size) == b"a" * 10
    assert cache.get("a", lambda: load("a"), _size) == b"a" * 10
    assert calls == ["a"] and cache.hits == 1 and cache.loads == 1
    assert cache.nbytes == 10 and len(cache) == 1


def test_least_recently_used_is_dropped_past_the_total() -> None:
    cache = DeleteCache(max_total_bytes=30, max_entry_bytes=30)
    for key in "abc":
        cache.get(key, lambda key=key: key.encode() * 10, _size)  # type: ignore[misc]
    cache.get("a", lambda: b"never", _size)  # a is now the most recent
    cache.get("d", lambda: b"d" * 10, _size)  # over 30 bytes: b goes
    assert cache.nbytes == 30
    reloaded: list[str] = []

    def load(key: str) -> bytes:
        reloaded.append(key)
        return key.encode() * 10

    for key in "acdb":
        cache.get(key, lambda key=key: load(key), _size)  # type: ignore[misc]
    assert reloaded == ["b"]


def test_values_above_the_entry_size_are_returned_but_not_kept() -> None:
    cache = DeleteCache(max_total_bytes=100, max_entry_bytes=8)
    assert cache.get("big", lambda: b"x" * 9, _size) == b"x" * 9
    assert len(cache) == 0 and cache.nbytes == 0
    off = DeleteCache(max_total_bytes=0)
    off.get("a", lambda: b"a", _size)
    assert len(off) == 0 and off.max_entry_bytes == 0


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="max_total_bytes=-1"):
        DeleteCache(max_total_bytes=-1)


def test_concurrent_users_share_kept_values() -> None:
    cache = DeleteCache(max_total_bytes=1 << 20)
    cache.get("k", lambda: b"v", _size)
    seen: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: seen.append(cache.get("k", lambda: b"other", _size)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [b"v"] * 8 and cache.hits == 8
