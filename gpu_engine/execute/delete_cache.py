"""Delete files kept across the executions of one job, so that each is read once per job, not once per
execution.

A changelog runs an execution per side of each snapshot (and per chunk of changed files), a compaction
one per file group; consecutive executions use mostly the same delete files (every commit of a Flink
upsert table adds equality deletes that reach every older data file). A :class:`DeleteCache` given to
each of them (:func:`.scan.execute`'s ``delete_cache``) keeps what they loaded: position delete indexes,
deletion vectors, each equality delete file's keys, and merged equality sets (by their exact files).

Within one execution, :class:`.shared_loads.SharedLoads` already loads each value once; this cache sits
below it. Like Iceberg Java's executor cache (``spark.sql.iceberg.executor-cache.max-total-size`` and
``max-entry-size``, 128 MB and 64 MB by default), it holds at most ``max_total_bytes``, drops the least
recently used value first and never keeps a value above ``max_entry_bytes``. It is thread-safe: a
compaction's groups run at once. Two executions asking for a value not yet kept may both load it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar, cast

V = TypeVar("V")

MAX_TOTAL_BYTES = 128 << 20
MAX_ENTRY_BYTES = 64 << 20


class DeleteCache:
    def __init__(
        self, max_total_bytes: int = MAX_TOTAL_BYTES, max_entry_bytes: int = MAX_ENTRY_BYTES
    ) -> None:
        if max_total_bytes < 0 or max_entry_bytes < 0:
            raise ValueError(
                f"delete cache sizes must not be negative: max_total_bytes={max_total_bytes}, "
                f"max_entry_bytes={max_entry_bytes}"
            )
        self.max_total_bytes = max_total_bytes
        self.max_entry_bytes = min(max_entry_bytes, max_total_bytes)
        self._values: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.loads = 0

    def get(self, key: Hashable, load: Callable[[], V], nbytes: Callable[[V], int]) -> V:
        """The value kept for ``key``, or ``load()``'s (kept when ``nbytes`` of it fits)."""
        with self._lock:
            found = self._values.get(key)
            if found is not None:
                self._values.move_to_end(key)
                self.hits += 1
                return cast(V, found[0])
        value = load()
        size = nbytes(value)
        with self._lock:
            self.loads += 1
            if size <= self.max_entry_bytes and key not in self._values:
                self._values[key] = (value, size)
                self._bytes += size
                while self._bytes > self.max_total_bytes:
                    _, (_, dropped) = self._values.popitem(last=False)
                    self._bytes -= dropped
        return value

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
