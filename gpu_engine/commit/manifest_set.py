"""The manifests of a new snapshot: new manifests for the files it adds, and the parent's manifests either
kept unchanged ("fast append": no file of theirs is removed) or rewritten with the removed files as
DELETED entries and the others as EXISTING (snapshot ids, sequence numbers and ``first_row_id`` kept).

New manifests do not depend on the base version (sequence numbers and v3 ``first_row_id`` are inherited
from the manifest list, spec "Sequence Numbers"), so the producer writes them once and reuses them on every
retry; rewritten manifests depend on the base and are written per attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ValidationError
from ..iceberg.content_file import DATA, ContentFile
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifest_write import ManifestContent, ManifestEntry, write_manifest
from ..iceberg.manifests import ADDED, DELETED, EXISTING, read_manifest
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from .entries import entries_of, manifest_spec_id
from .removal_scope import RemovalScope
from .update import Faults, FileKey, file_key

NewPath = Callable[[], str]
"""Returns the recorded path of the next manifest to write."""


@dataclass(frozen=True)
class ManifestSet:
    """The manifests of a new snapshot, in manifest list order, and what building them found."""

    manifests: tuple[ManifestFile, ...]
    removed: tuple[ContentFile, ...]  # the removed files' entries, for the summary
    created: int
    kept: int
    replaced: int
    entries_processed: int


def write_added(
    io: FileIO,
    md: TableMetadata,
    files: Sequence[ContentFile],
    *,
    snapshot_id: int,
    new_path: NewPath,
    faults: Faults,
    written: list[str],
    data_sequence_number: int | None = None,
) -> tuple[ManifestFile, ...]:
    """One manifest per (data or deletes, spec) of ``files``, entries ADDED; paths appended to ``written``.
    ``data_sequence_number``: written into the entries (the file sequence number is still inherited)."""
    groups: dict[tuple[ManifestContent, int], list[ContentFile]] = {}
    for f in files:
        groups.setdefault(("data" if f.content == DATA else "deletes", f.spec_id), []).append(f)
    out = []
    for (content, spec_id), group in sorted(groups.items()):
        entries = [
            ManifestEntry(ADDED, None, data_sequence_number, None, f)
            if data_sequence_number is not None
            else ManifestEntry.added(f)
            for f in group
        ]
        out.append(write_entries(io, md, content, spec_id, entries, snapshot_id, new_path, faults, written))
    return tuple(out)


def write_entries(
    io: FileIO, md: TableMetadata, content: ManifestContent, spec_id: int, entries: Sequence[ManifestEntry],
    snapshot_id: int, new_path: NewPath, faults: Faults, written: list[str],
) -> ManifestFile:  # fmt: skip
    """Write ``entries`` as the next manifest of the commit (``faults`` stage ``manifest``); its list row
    with the recorded path, which is appended to ``written``."""
    path = new_path()
    faults("manifest")
    spec = md.spec_by_id(spec_id)
    manifest = write_manifest(
        io, io.resolve(path), format_version=md.format_version, spec=spec,
        schema=md.schema_for_spec(spec), content=content, snapshot_id=snapshot_id, entries=entries,
    )  # fmt: skip
    written.append(path)
    return replace(manifest, manifest_path=path)


def _legacy(md: TableMetadata, m: ManifestFile) -> bool:
    """Whether ``m`` must be written again to be listed in ``md``'s manifest lists: a v1 snapshot's inline
    ``manifests`` (no length, no spec id), or a v1 manifest list's entry without the file and row counts
    (optional in v1, required from v2 on) in an upgraded table."""
    if m.manifest_length is None or m.partition_spec_id is None:
        return True
    counts = (
        m.added_files_count, m.existing_files_count, m.deleted_files_count,
        m.added_rows_count, m.existing_rows_count, m.deleted_rows_count,
    )  # fmt: skip
    return md.format_version >= 2 and any(c is None for c in counts)


def filter_existing(
    io: FileIO,
    md: TableMetadata,
    manifests: Sequence[ManifestFile],
    removed: frozenset[FileKey],
    *,
    snapshot_id: int,
    new_path: NewPath,
    faults: Faults,
    written: list[str],
    rewritten_entries: dict[str, list[ManifestEntry]] | None = None,
    removed_from: RemovalScope | None = None,
) -> tuple[list[ManifestFile], list[ContentFile], int, int]:
    """The parent's ``manifests`` with ``removed`` files marked DELETED: (manifests, removed files' entries,
    manifests replaced, entries processed). Entries match by :data:`FileKey` (a DV by its Puffin path and
    offset: the other DVs of its Puffin file stay). :class:`ValidationError` if a removed file is not live.

    ``rewritten_entries`` receives, by recorded path, the entries of each manifest written here (v2+ tables,
    whose entries carry their sequence numbers explicitly and read back as written), so that a merge in
    the same commit need not read them back. ``removed_from``: the manifests that can list a removed
    file; the others are kept unread (None: every manifest is read)."""
    paths = pa.array(sorted({p for p, _ in removed}), pa.string())
    out: list[ManifestFile] = []
    gone: list[ContentFile] = []
    replaced = processed = 0
    for m in manifests:
        legacy = _legacy(md, m)
        if not legacy and (not removed or (removed_from is not None and not removed_from.may_list(md, m))):
            out.append(m)
            continue
        table = read_manifest(replace(m, manifest_path=io.resolve(m.manifest_path)), open_input=io.open_input)
        live = pc.not_equal(table.column("status"), pa.scalar(DELETED, pa.int32()))
        hit = pc.is_in(table.column("file_path"), value_set=paths)  # a superset of the keys' entries
        if not legacy and not pc.any(pc.and_(live, hit)).as_py():
            out.append(m)
            continue
        spec_id = manifest_spec_id(m, table)
        entries = entries_of(table, m, md.spec_by_id(spec_id))
        if not legacy and not any(file_key(e.file) in removed for e in entries):
            out.append(m)  # only other DVs of a removed DV's Puffin file: unchanged
            continue
        processed += len(entries)
        rewritten = []
        for e in entries:
            if file_key(e.file) in removed:
                gone.append(e.file)
                rewritten.append(
                    ManifestEntry(DELETED, snapshot_id, e.sequence_number, e.file_sequence_number, e.file)
                )
            else:
                rewritten.append(
                    ManifestEntry(EXISTING, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.file)
                )
        content: ManifestContent = "deletes" if m.content == 1 else "data"
        new = write_entries(io, md, content, spec_id, rewritten, snapshot_id, new_path, faults, written)
        if rewritten_entries is not None and md.format_version >= 2:
            rewritten_entries[new.manifest_path] = rewritten
        out.append(new)
        replaced += 1
    missing = removed - {file_key(f) for f in gone}
    if missing:
        shown = [p if o is None else f"{p} (offset {o})" for p, o in sorted(missing, key=repr)[:5]]
        raise ValidationError(
            f"table {md.location}: {len(missing)} file(s) to remove are not live in the current snapshot "
            f"(removed concurrently?): {shown}"
        )
    return out, gone, replaced, processed
