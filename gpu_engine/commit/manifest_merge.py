"""Manifest merging on commit, as Iceberg Java's merging snapshot producers do (``commit.manifest-merge.*``).

Without it a table that takes many small commits (streaming appends, merge-on-read deletes) gains one
manifest per commit, and every scan plans over all of them. Table properties, by Iceberg's names and
defaults: ``commit.manifest-merge.enabled`` (true), ``commit.manifest.min-count-to-merge`` (100) and
``commit.manifest.target-size-bytes`` (8 MiB).

The rules (Java's ``ManifestMergeManager``): a new snapshot's manifests are grouped by content (data,
deletes) and partition spec. Each group is packed from its end (the oldest manifests) into bins of at most
the target size with one bin open at a time, so the bin left partly filled is the newest one. A bin of one
manifest is kept as it is. The bin holding the first manifest of its content (this commit's new files) is
merged only once it holds ``min-count-to-merge`` manifests: until then small commits just add a manifest
("fast append"). Every other bin of two or more manifests is merged into one new manifest.

A merged manifest holds this snapshot's ADDED entries as ADDED (sequence numbers and v3 row ids still
inherited from the manifest list), this snapshot's DELETED entries, and every other live entry as EXISTING
with its snapshot id, sequence numbers and ``first_row_id`` written explicitly (spec "Manifests"); DELETED
entries of older snapshots are history and are dropped. Manifests this commit wrote and then merged are
left to the producer's cleanup once the commit lands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifest_write import ManifestContent, ManifestEntry, is_unassigned
from ..iceberg.manifests import ADDED, DELETED, EXISTING, read_manifest
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..planning.binpack import pack
from ..properties import bool_property, int_property
from .entries import entries_of
from .manifest_set import write_entries
from .update import Faults

MERGE_ENABLED = "commit.manifest-merge.enabled"
MIN_COUNT_TO_MERGE = "commit.manifest.min-count-to-merge"
TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"


@dataclass(frozen=True)
class MergePolicy:
    """When a commit merges manifests (see the module doc)."""

    enabled: bool = True
    min_count_to_merge: int = 100
    target_size_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MergePolicy:
        """The policy of a table's properties; InvalidProperty naming a bad one."""
        return cls(
            bool_property(props, MERGE_ENABLED, cls.enabled),
            int_property(props, MIN_COUNT_TO_MERGE, cls.min_count_to_merge, minimum=0),
            int_property(props, TARGET_SIZE_BYTES, cls.target_size_bytes, minimum=1),
        )


@dataclass(frozen=True)
class Merged:
    """The manifests of the new snapshot after merging, how many were written by merging, and how many
    entries those hold."""

    manifests: tuple[ManifestFile, ...]
    created: int = 0
    entries_processed: int = 0


def merge_manifests(
    io: FileIO,
    md: TableMetadata,
    manifests: Sequence[ManifestFile],
    *,
    policy: MergePolicy,
    snapshot_id: int,
    new_path: Callable[[], str],
    faults: Faults,
    written: list[str],
    known: Mapping[str, Sequence[ManifestEntry]] | None = None,
) -> Merged:
    """``manifests`` (this commit's first, then the parent's) with their bins merged per ``policy``; the
    paths of merged manifests are appended to ``written``. Unchanged (same order) when nothing merges.
    ``known``: entries of manifests this commit wrote, by path, used instead of reading them back."""
    if not policy.enabled or not manifests:
        return Merged(tuple(manifests))
    groups: dict[tuple[int, int], list[ManifestFile]] = {}
    first: dict[int, str] = {}
    for m in manifests:
        content = m.content or 0
        first.setdefault(content, m.manifest_path)
        groups.setdefault((content, _spec_id(m)), []).append(m)
    out: list[ManifestFile] = []
    created = processed = 0
    for (content, spec_id), group in groups.items():
        for bin_ in _pack_end(group, policy.target_size_bytes):
            holds_first = any(m.manifest_path == first[content] for m in bin_)
            if len(bin_) == 1 or (holds_first and len(bin_) < policy.min_count_to_merge):
                out.extend(bin_)
                continue
            entries = [e for m in bin_ for e in _merged_entries(io, md, m, spec_id, snapshot_id, known or {})]
            kind: ManifestContent = "deletes" if content == 1 else "data"
            out.append(write_entries(io, md, kind, spec_id, entries, snapshot_id, new_path, faults, written))
            created += 1
            processed += len(entries)
    if not created:
        return Merged(tuple(manifests))
    return Merged(tuple(out), created, processed)


def _pack_end(group: Sequence[ManifestFile], target: int) -> list[list[ManifestFile]]:
    """Java's ``ListPacker.packEnd`` with one open bin: bins cut from the end of ``group``, in order."""
    bins = pack(list(reversed(group)), lambda m: m.manifest_length or 0, target)
    return [list(reversed(b)) for b in reversed(bins)]


def _merged_entries(
    io: FileIO,
    md: TableMetadata,
    m: ManifestFile,
    spec_id: int,
    snapshot_id: int,
    known: Mapping[str, Sequence[ManifestEntry]],
) -> list[ManifestEntry]:
    """The entries ``m`` contributes to a merged manifest (see the module doc)."""
    own = m.added_snapshot_id == snapshot_id  # written by this commit: not listed yet
    entries = known.get(m.manifest_path) if own else None
    if entries is None:
        table = read_manifest(replace(m, manifest_path=io.resolve(m.manifest_path)), open_input=io.open_input)
        entries = entries_of(table, m, md.spec_by_id(spec_id), deleted_by=snapshot_id if own else None)
    out = []
    for e in entries:
        if e.status == DELETED or (e.status == ADDED and e.snapshot_id == snapshot_id):
            # this snapshot's own change; its unassigned sequence numbers stay to be inherited
            seq, file_seq = e.sequence_number, e.file_sequence_number
            out.append(replace(e, sequence_number=_assigned(seq), file_sequence_number=_assigned(file_seq)))
        else:
            out.append(replace(e, status=EXISTING))
    return out


def _assigned(sequence_number: int | None) -> int | None:
    return None if is_unassigned(sequence_number) else sequence_number


def _spec_id(m: ManifestFile) -> int:
    return m.partition_spec_id if m.partition_spec_id is not None else 0
