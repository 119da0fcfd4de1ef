"""Files written a piece at a time, at most a few hundred of them open at once.

A partitioned write keeps one file open per partition until its last rows: a write into thousands of
partitions would run out of file descriptors (1024 by default on Linux). :class:`OpenFiles` keeps at most
``limit`` of its :class:`SlotFile` objects open, across threads: a write to a closed one reopens it for
appending and closes the least recently written one that no thread is writing to.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import BinaryIO

from .fileio import naming

_DEFAULT_LIMIT = 256


def default_limit() -> int:
    """A quarter of this process's file descriptor limit (the rest is the reader's, the catalog's, and
    the caller's), between 16 and 256."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):  # not on a Unix
        return _DEFAULT_LIMIT
    if soft == resource.RLIM_INFINITY:
        return _DEFAULT_LIMIT
    return max(16, min(_DEFAULT_LIMIT, soft // 4))


class OpenFiles:
    """The files of one write, at most ``limit`` open at once."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = max(1, default_limit() if limit is None else limit)
        self.lock = threading.Lock()
        self.open: OrderedDict[SlotFile, None] = OrderedDict()  # least recently written first

    def create(self, path: str, shown: str | None = None) -> SlotFile:
        """A new file at ``path`` (created exclusively: an existing file is an error); errors name
        ``shown`` (the file ``path`` becomes) when they name no file."""
        return SlotFile(self, path, shown or path)

    def _admit(self, f: SlotFile) -> None:
        """Mark ``f`` (open) as the most recently written; close others beyond the limit (lock held)."""
        self.open[f] = None
        self.open.move_to_end(f)
        for other in list(self.open):
            if len(self.open) <= self.limit:
                break
            if other is not f and other.pins == 0:
                other._shut()


class SlotFile:
    """A write-only file of an :class:`OpenFiles`: reopened for appending when written after it was
    closed to make room."""

    def __init__(self, files: OpenFiles, path: str, shown: str) -> None:
        self.files, self.path, self.shown = files, path, shown
        self.pins = 0  # threads writing to it now: never closed under them
        self.done = False
        with files.lock:
            self.handle: BinaryIO | None = open(path, "xb")  # noqa: SIM115 (closed by close or _shut)
            files._admit(self)

    def write(self, data: bytes | memoryview) -> int:
        with self.files.lock:
            if self.done:
                raise ValueError(f"write to a closed file: {self.path}")
            if self.handle is None:
                self.handle = open(self.path, "ab")  # noqa: SIM115
            self.pins += 1
            self.files._admit(self)
            handle = self.handle
        try:
            with naming(self.shown):
                return handle.write(data)
        finally:
            with self.files.lock:
                self.pins -= 1

    def close_synced(self) -> None:
        """Flush, fsync and close the file (reopened for the fsync if it was closed to make room)."""
        with self.files.lock:
            handle, self.handle, self.done = self.handle, None, True
            self.files.open.pop(self, None)
        with naming(self.shown), handle if handle is not None else open(self.path, "ab") as h:
            h.flush()
            os.fsync(h.fileno())

    def close(self) -> None:
        """Close without syncing (the file is being given up)."""
        with self.files.lock:
            self.done = True
            self._shut()

    def _shut(self) -> None:
        """Close the handle (the lock held); the file stays this slot's."""
        self.files.open.pop(self, None)
        if self.handle is not None:
            handle, self.handle = self.handle, None
            handle.close()


__all__ = ["OpenFiles", "SlotFile", "default_limit"]
