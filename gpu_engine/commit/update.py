"""What a commit changes and what it reports: :class:`SnapshotUpdate`, :class:`CommitResult`.

A :class:`SnapshotUpdate` describes one new snapshot independently of the table version it lands on, so
the producer (:mod:`gpu_engine.commit.producer`) can re-apply it on refreshed metadata after a lost race:
the files it adds, the files it removes (by recorded path) and an optional validation run against the
refreshed base on every attempt.

Operations (spec "Snapshots"): ``append`` adds data files only; ``overwrite`` adds and removes data and
delete files in a logical overwrite; ``delete`` removes data files and/or adds delete files; ``replace``
rewrites files without changing the table's rows (compaction).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..errors import GpuEngineError
from ..iceberg.content_file import DATA, ContentFile
from ..iceberg.metadata import TableMetadata

Operation = Literal["append", "overwrite", "delete", "replace"]
OPERATIONS: tuple[Operation, ...] = ("append", "overwrite", "delete", "replace")
Validation = Callable[[TableMetadata], None]
"""Called with the base metadata of every attempt; raise (e.g. :class:`ValidationError`) to abort."""
Faults = Callable[[str], None]
"""Test hook called with a stage name before the stage runs; whatever it raises acts as that stage's failure.
Stages: ``data`` (appends), ``manifest``, ``manifest-list``, ``metadata``, ``swap``, ``cleanup``."""


class ValidationError(GpuEngineError, ValueError):
    """A commit whose conditions no longer hold on the current table (a file it removes is gone, the table
    was replaced, a caller's validation failed). Not retried: nothing was committed."""


@dataclass(frozen=True)
class SnapshotUpdate:
    """One snapshot's change: ``added`` data and delete files, ``removed`` recorded file paths.

    ``summary`` adds properties to the snapshot summary (``operation`` and the Appendix F metrics are
    computed). ``validate`` runs against the base metadata of every attempt.
    """

    operation: Operation
    added: tuple[ContentFile, ...] = ()
    removed: frozenset[str] = frozenset()
    validate: Validation | None = field(default=None, compare=False)
    summary: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}, not {self.operation!r}")
        object.__setattr__(self, "added", tuple(self.added))
        object.__setattr__(self, "removed", frozenset(self.removed))
        if self.operation == "append":
            if self.removed:
                raise ValueError(f"an append removes no files (removed: {sorted(self.removed)[:3]})")
            deletes = [f.path for f in self.added if f.content != DATA]
            if deletes:
                raise ValueError(f"an append adds data files only, not delete files ({deletes[:3]})")
        if "operation" in self.summary:
            raise ValueError("summary: 'operation' is set from the update's operation")
        paths = [f.path for f in self.added]
        if len(set(paths)) != len(paths):
            raise ValueError("the same file is added twice")
        if self.removed & set(paths):
            raise ValueError(f"files both added and removed: {sorted(self.removed & set(paths))[:3]}")

    @classmethod
    def append(cls, files: tuple[ContentFile, ...] | list[ContentFile]) -> SnapshotUpdate:
        return cls("append", tuple(files))


@dataclass(frozen=True)
class CommitResult:
    """A landed commit: the new snapshot, the metadata file now current, and how it went.

    ``orphaned``: files of failed attempts that cleanup could not delete (nothing references them).
    """

    snapshot_id: int
    sequence_number: int
    metadata_location: str
    manifest_list: str
    summary: Mapping[str, str]
    attempts: int
    orphaned: tuple[str, ...] = ()
