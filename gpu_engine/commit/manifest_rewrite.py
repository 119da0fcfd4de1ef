"""Manifest rewriting, Iceberg's ``rewrite_manifests``: a ``replace`` snapshot that changes no rows and
rewrites a branch's manifests into fewer, target-sized ones clustered by partition, so that planning reads
fewer manifests and prunes more of them by their partition summaries.

Tables written by many small commits (streaming appends, merge-on-read deletes) or compacted with
manifest merging off end up with hundreds of small manifests; this is the maintenance that fixes them.

The rules (Java's ``RewriteManifestsSparkAction`` and ``BaseRewriteManifests``): the head's manifests are
grouped by content (data, deletes) and partition spec; a group of one manifest that would stay one manifest
is kept as it is. Every other group's live entries are sorted by partition tuple and split evenly into
``ceil(group bytes / target)`` manifests (``commit.manifest.target-size-bytes``, 8 MiB). Entries become
EXISTING with their snapshot ids, sequence numbers and (v3) ``first_row_id`` written explicitly; DELETED
entries are history and are dropped. New manifests are listed first, the kept ones after them in their
order. ``spec_id`` restricts the rewrite to one spec's manifests (Java rewrites the default spec's only;
here every spec's unless one is named).

Each commit attempt recomputes the rewrite on the refreshed head, so a concurrent commit never conflicts;
the manifests of lost attempts are deleted by the producer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import _args
from ..errors import InvalidOption
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifest_write import ManifestContent, ManifestEntry
from ..iceberg.manifests import EXISTING, read_manifest
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from .entries import entries_of, manifest_spec_id, snapshot_manifests
from .manifest_merge import MergePolicy
from .manifest_set import NewPath, write_entries
from .producer import check_committable, commit
from .table_update import parent_of, require_branch
from .update import CommitResult, Faults, SnapshotUpdate

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class ManifestRewriteResult:
    """What :func:`rewrite_manifests` did: the manifests it replaced and those it wrote (recorded paths),
    how many entries it rewrote, and its commit (None: nothing to do)."""

    rewritten_manifests: tuple[str, ...] = ()
    added_manifests: tuple[str, ...] = ()
    entries: int = 0
    commit: CommitResult | None = None


@dataclass(frozen=True)
class ManifestRewrite:
    """Which manifests a rewrite takes (``spec_id``: only that spec's; None: all) and the size of the new
    ones; applied by the snapshot producer to the head's manifests on every attempt."""

    target_size_bytes: int
    spec_id: int | None = None

    def groups(self, manifests: Sequence[ManifestFile]) -> list[list[ManifestFile]]:
        """The groups of ``manifests`` to rewrite (see the module doc)."""
        by_key: dict[tuple[int, int], list[ManifestFile]] = {}
        for m in manifests:
            spec_id = m.partition_spec_id if m.partition_spec_id is not None else 0
            if self.spec_id is None or spec_id == self.spec_id:
                by_key.setdefault((m.content or 0, spec_id), []).append(m)
        return [g for g in by_key.values() if len(g) > 1 or self._count(g) > 1]

    def _count(self, group: Sequence[ManifestFile]) -> int:
        """How many manifests ``group`` becomes."""
        size = sum(m.manifest_length or 0 for m in group)
        return max(1, math.ceil(size / self.target_size_bytes))

    def __call__(
        self,
        io: FileIO,
        md: TableMetadata,
        manifests: Sequence[ManifestFile],
        *,
        snapshot_id: int,
        new_path: NewPath,
        faults: Faults,
        written: list[str],
    ) -> tuple[tuple[ManifestFile, ...], int]:
        """The new snapshot's manifests and the number of entries rewritten."""
        out: list[ManifestFile] = []
        rewritten: set[str] = set()
        processed = 0
        for group in self.groups(manifests):
            entries: list[ManifestEntry] = []
            spec_id = 0
            for m in group:
                table = read_manifest(
                    replace(m, manifest_path=io.resolve(m.manifest_path)), open_input=io.open_input
                )
                spec_id = manifest_spec_id(m, table)
                entries += [replace(e, status=EXISTING) for e in entries_of(table, m, md.spec_by_id(spec_id))]
            entries.sort(key=lambda e: _partition_key(e.file.partition))
            kind: ManifestContent = "deletes" if (group[0].content or 0) == 1 else "data"
            for chunk in _split(entries, self._count(group)):
                out.append(
                    write_entries(io, md, kind, spec_id, chunk, snapshot_id, new_path, faults, written)
                )
            rewritten.update(m.manifest_path for m in group)
            processed += len(entries)
        return (*out, *(m for m in manifests if m.manifest_path not in rewritten)), processed


def _partition_key(partition: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """Orders partition tuples, nulls first."""
    return tuple((v is not None, v) if v is not None else (False, 0) for v in partition)


def _split(entries: list[ManifestEntry], count: int) -> list[list[ManifestEntry]]:
    """``entries`` in ``count`` (at most one per entry) consecutive chunks of near-equal length."""
    count = min(count, len(entries))
    size = math.ceil(len(entries) / count) if count else 0
    return [entries[i : i + size] for i in range(0, len(entries), size)] if size else []


def rewrite_manifests(
    table: Table,
    *,
    spec_id: int | None = None,
    target_size_bytes: int | None = None,
    branch: str = "main",
    faults: Faults | None = None,
) -> ManifestRewriteResult:
    """Rewrite the manifests of ``branch`` (see the module doc); ``target_size_bytes`` overrides the
    table's ``commit.manifest.target-size-bytes``."""
    check_committable(table)
    md = table.metadata
    require_branch(md, branch, "rewrite_manifests")
    if spec_id is not None:
        md.spec_by_id(spec_id)  # SpecNotFound naming the table
    if target_size_bytes is not None:  # a Java long, as commit.manifest.target-size-bytes
        target_size_bytes = _args.integer(
            target_size_bytes, "target_size_bytes", InvalidOption, minimum=1, maximum=_args.JAVA_LONG_MAX
        )
    target = target_size_bytes or MergePolicy.from_properties(md.properties).target_size_bytes
    rewrite = ManifestRewrite(target, spec_id)
    head = parent_of(md, branch)
    if head is None or not rewrite.groups(snapshot_manifests(table.io, head)):
        return ManifestRewriteResult()
    result = commit(table, SnapshotUpdate("replace", manifest_rewrite=rewrite), branch=branch, faults=faults)
    new = table.metadata.snapshot_by_id(result.snapshot_id)
    after = snapshot_manifests(table.io, new)
    before = (
        ()
        if new.parent_snapshot_id is None
        else snapshot_manifests(table.io, table.metadata.snapshot_by_id(new.parent_snapshot_id))
    )
    now = {m.manifest_path for m in after}
    return ManifestRewriteResult(
        rewritten_manifests=tuple(m.manifest_path for m in before if m.manifest_path not in now),
        added_manifests=tuple(m.manifest_path for m in after if m.added_snapshot_id == result.snapshot_id),
        entries=int(result.summary.get("entries-processed", "0")),
        commit=result,
    )
