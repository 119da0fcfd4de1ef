"""What a commit changes and what it reports: :class:`SnapshotUpdate`, :class:`CommitResult`.

A :class:`SnapshotUpdate` describes one new snapshot independently of the table version it lands on, so
the producer (:mod:`gpu_engine.commit.producer`) can re-apply it on refreshed metadata after a lost race:
the files it adds, the files it removes (by recorded path, delete files by :data:`FileKey`) and an optional
validation run against the refreshed base on every attempt.

Operations (spec "Snapshots"): ``append`` adds data files only; ``overwrite`` adds and removes data and
delete files in a logical overwrite; ``delete`` removes data files and/or adds delete files; ``replace``
rewrites files without changing the table's rows (compaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from ..errors import ValidationError
from ..iceberg.content_file import DATA, ContentFile
from ..iceberg.metadata import TableMetadata
from .removal_scope import RemovalScope

if TYPE_CHECKING:
    from ..iceberg.manifest_list import ManifestFile
    from ..io.fileio import FileIO

__all__ = [
    "OPERATIONS", "CommitResult", "Faults", "FileKey", "ManifestRewriter", "Operation", "Removed",
    "SnapshotUpdate",
    "Validation", "ValidationError", "file_key",
]  # fmt: skip

Operation = Literal["append", "overwrite", "delete", "replace"]
OPERATIONS: tuple[Operation, ...] = ("append", "overwrite", "delete", "replace")
Validation = Callable[[TableMetadata], None]
"""Called with the base metadata of every attempt; raise (e.g. :class:`ValidationError`) to abort."""
Faults = Callable[[str], None]
"""Test hook called with a stage name before the stage runs; whatever it raises acts as that stage's failure.
Stages: ``data`` (appends), ``manifest``, ``manifest-list``, ``metadata``, ``swap``, ``cleanup``."""


class ManifestRewriter(Protocol):
    """Rewrites the manifests a new snapshot takes from its parent (a manifest-only ``replace``, see
    :mod:`.manifest_rewrite`): the new snapshot's manifests and the number of entries rewritten. Manifests
    it writes get their paths from ``new_path`` and are appended to ``written``."""

    def __call__(
        self,
        io: FileIO,
        md: TableMetadata,
        manifests: Sequence[ManifestFile],
        *,
        snapshot_id: int,
        new_path: Callable[[], str],
        faults: Faults,
        written: list[str],
    ) -> tuple[tuple[ManifestFile, ...], int]: ...


FileKey: TypeAlias = tuple[str, int | None]
"""A manifest entry's identity: (recorded path, ``content_offset``). A deletion vector is one blob of a Puffin
file that may hold DVs of other data files, so its key carries its offset; other files have offset None."""
Removed: TypeAlias = str | FileKey
"""A file to remove: a recorded path (a data file or a whole position/equality delete file, i.e. the key
``(path, None)``) or a :data:`FileKey`."""


def deletes_only(md: TableMetadata) -> RemovalScope:
    """``removed_from`` of an update that removes delete files only: the delete manifests of every spec."""
    return RemovalScope.of_kinds(("deletes", spec_id) for spec_id in md.specs)


def file_key(item: Removed | ContentFile) -> FileKey:
    """The :data:`FileKey` of a removal item or of a manifest entry's file."""
    if isinstance(item, ContentFile):
        return (item.path, item.content_offset)
    if isinstance(item, str):
        return (item, None)
    path, offset = item
    return (path, offset)


@dataclass(frozen=True)
class SnapshotUpdate:
    """One snapshot's change: ``added`` data and delete files, ``removed`` files as recorded paths or
    :data:`FileKey` values (normalised to keys: removing one DV of a Puffin file keeps its other DVs).

    ``summary`` adds properties to the snapshot summary (``operation`` and the Appendix F metrics are
    computed). ``validate`` runs against the base metadata of every attempt. ``data_sequence_number``: the
    data sequence number of the added files (a compaction keeps the one it read at, so that deletes
    committed meanwhile still apply to the rewritten rows); None: the new snapshot's, by inheritance.
    ``manifest_rewrite``: a ``replace`` that adds and removes no files but rewrites the parent's manifests
    (instead of the commit's manifest merging). ``removed_from``: the parent's manifests that can list the
    removed files (:class:`~.removal_scope.RemovalScope`: by content and spec, and by partition summaries
    when built from the files), so that the commit reads only those; None: any manifest may.
    """

    operation: Operation
    added: tuple[ContentFile, ...]
    removed: frozenset[FileKey]
    validate: Validation | None = field(compare=False)
    summary: Mapping[str, str]
    data_sequence_number: int | None
    manifest_rewrite: ManifestRewriter | None = field(compare=False)
    removed_from: RemovalScope | None

    def __init__(
        self,
        operation: Operation,
        added: Iterable[ContentFile] = (),
        removed: Iterable[Removed] = frozenset(),
        validate: Validation | None = None,
        summary: Mapping[str, str] | None = None,
        data_sequence_number: int | None = None,
        manifest_rewrite: ManifestRewriter | None = None,
        removed_from: RemovalScope | None = None,
    ) -> None:
        if operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
        object.__setattr__(self, "operation", operation)
        object.__setattr__(self, "added", tuple(added))
        object.__setattr__(self, "removed", _keys(removed))
        object.__setattr__(self, "validate", validate)
        object.__setattr__(self, "summary", dict(summary or {}))
        object.__setattr__(self, "data_sequence_number", data_sequence_number)
        object.__setattr__(self, "manifest_rewrite", manifest_rewrite)
        object.__setattr__(self, "removed_from", removed_from)
        self._check()

    def _check(self) -> None:
        if self.operation == "append":
            if self.removed:
                raise ValueError(
                    f"an append removes no files (removed: {sorted(self.removed, key=repr)[:3]})"
                )
            deletes = [f.path for f in self.added if f.content != DATA]
            if deletes:
                raise ValueError(f"an append adds data files only, not delete files ({deletes[:3]})")
        if self.manifest_rewrite is not None and (self.operation != "replace" or self.added or self.removed):
            raise ValueError("a manifest rewrite is a 'replace' that adds and removes no files")
        if "operation" in self.summary:
            raise ValueError("summary: 'operation' is set from the update's operation")
        keys = [file_key(f) for f in self.added]
        if len(set(keys)) != len(keys):
            raise ValueError("the same file is added twice")
        both = self.removed & set(keys)
        if both:
            raise ValueError(f"files both added and removed: {sorted(both, key=repr)[:3]}")

    @property
    def removed_paths(self) -> frozenset[str]:
        """The recorded paths of the removed entries."""
        return frozenset(p for p, _ in self.removed)

    @classmethod
    def append(cls, files: tuple[ContentFile, ...] | list[ContentFile]) -> SnapshotUpdate:
        return cls("append", tuple(files))


def _keys(items: Iterable[Removed]) -> frozenset[FileKey]:
    if isinstance(items, str):
        raise TypeError("removed: a collection of paths or (path, content_offset) keys, not one string")
    out = set()
    for item in items:
        if not isinstance(item, str) and not (
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], int))
        ):  # fmt: skip
            raise TypeError(f"removed: {item!r} is neither a path nor a (path, content_offset) key")
        out.add(file_key(item))
    return frozenset(out)


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
