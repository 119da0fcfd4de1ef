"""Load-once values shared by the tasks of one scan (delete files), dropped after their last user.

A scan knows up front which tasks use which delete file, so each loaded value carries a count of the
tasks still to use it; when the last one finishes the value is released and memory follows the deletes
in use, not every delete file of the table. Loading happens once even when several worker threads ask
at the same time (a per-key lock); a failed load raises in every task that asked for it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

V = TypeVar("V")


class SharedLoads(Generic[V]):
    def __init__(self, uses: Iterable[Hashable]) -> None:
        self._remaining: Counter[Hashable] = Counter(uses)
        self._values: dict[Hashable, V] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()
        self.loads = 0  # how many values were loaded (each key at most once while in use)

    def get(self, key: Hashable, load: Callable[[], V]) -> V:
        with self._guard:
            if key in self._values:
                return self._values[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                if key in self._values:
                    return self._values[key]
            value = load()
            with self._guard:
                self.loads += 1
                if self._remaining[key] > 0:  # keys nobody else will use are not kept
                    self._values[key] = value
            return value

    def release(self, key: Hashable) -> None:
        """One user of ``key`` is done with it; the value is dropped after the last one."""
        with self._guard:
            self._remaining[key] -= 1
            if self._remaining[key] <= 0:
                self._values.pop(key, None)
                self._locks.pop(key, None)

    def __len__(self) -> int:
        with self._guard:
            return len(self._values)
