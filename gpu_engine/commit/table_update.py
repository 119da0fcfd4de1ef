"""New table metadata for a new snapshot (spec "Table Metadata", "Snapshots", "Snapshot Row IDs") and the
metadata file that holds it.

The snapshot gets the next sequence number (v2+: ``last-sequence-number + 1``; v1 has none and stays 0),
the base's current schema id, and in v3 ``first-row-id`` = the table's ``next-row-id`` and ``added-rows``
as the manifest list assigned them; the table's ``next-row-id`` advances by ``added-rows``. The branch ref
moves to the snapshot (``main`` also moves ``current-snapshot-id`` and appends to ``snapshot-log``); the
base metadata file is appended to ``metadata-log``, which keeps the newest
``write.metadata.previous-versions-max`` (100) entries; with ``write.metadata.delete-after-commit.enabled``
the files trimmed from it are deleted once the commit landed.

Metadata files are named ``<NNNNN>-<uuid>.metadata.json`` (the base's version + 1) as metastore catalogs
do, or ``<uuid>.metadata.json`` for file-system tables (the catalog renames it to ``v<N>.metadata.json``);
``write.metadata.compression-codec=gzip`` writes ``.gz.metadata.json``. They, manifest lists and manifests
go to ``write.metadata.path`` when set (:func:`metadata_dir`). Files are created exclusively.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace

from ..errors import InvalidProperty, MetadataError, UnsupportedFeature, ValidationError
from ..iceberg.manifest_write import WrittenManifestList
from ..iceberg.metadata import TableMetadata, metadata_to_json
from ..iceberg.snapshots import (
    MAIN_BRANCH,
    MetadataLogEntry,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    check_table_refs,
)
from ..io.fileio import FileIO
from ..properties import bool_property, int_property

_log = logging.getLogger(__name__)

PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
METADATA_PATH = "write.metadata.path"
COMPRESSION_CODEC = "write.metadata.compression-codec"
_MAX_LONG = (1 << 63) - 1
_VERSION = re.compile(r"^(?:v)?(\d+)[-.]")


def new_snapshot_id(md: TableMetadata) -> int:
    """A positive random snapshot id not used by ``md`` (the spec's suggestion: uuid4 halves XORed)."""
    while True:
        u = uuid.uuid4().int
        sid = ((u >> 64) ^ (u & ((1 << 64) - 1))) & _MAX_LONG
        if sid and sid not in md.snapshots_by_id:
            return sid


def next_sequence_number(md: TableMetadata) -> int:
    return md.last_sequence_number + 1 if md.format_version >= 2 else 0


def require_branch(md: TableMetadata, branch: str, action: str) -> None:
    """:class:`ValidationError` unless ``branch`` is main or a branch of the table: a maintenance job on a
    misspelt branch must not create it (or report nothing to do)."""
    ref = md.refs.get(branch)
    if ref is None and branch != "main":
        raise ValidationError(
            f"table {md.location}: {action}: no branch named {branch!r} (refs: {sorted(md.refs)})"
        )
    if ref is not None and ref.is_tag:
        raise ValidationError(f"table {md.location}: {action}: {branch!r} is a tag, not a branch")


def parent_of(md: TableMetadata, branch: str) -> Snapshot | None:
    """The head of ``branch``; a branch not created yet forks from the current snapshot (None for an empty
    table), as in Iceberg Java. A tag cannot be committed to."""
    if not isinstance(branch, str) or not branch:  # Java: "Invalid branch name: null"
        raise ValidationError(f"table {md.location}: branch {branch!r} is not a branch name")
    ref = md.refs.get(branch)
    if ref is None:
        return md.current_snapshot()
    if not ref.is_branch:
        raise ValidationError(f"table {md.location}: {branch!r} is a tag; commits go to branches")
    return md.snapshot_by_id(ref.snapshot_id)


def now_ms(md: TableMetadata) -> int:
    """The commit's timestamp: now, but never before the base's ``last-updated-ms`` (logs stay ordered)."""
    return max(int(time.time() * 1000), md.last_updated_ms)


def with_snapshot(
    md: TableMetadata,
    base_location: str,
    *,
    snapshot_id: int,
    branch: str,
    timestamp_ms: int,
    summary: Mapping[str, str],
    manifest_list: WrittenManifestList,
) -> TableMetadata:
    """``md`` with a new snapshot at the head of ``branch`` (see the module doc)."""
    v = md.format_version
    parent = parent_of(md, branch)
    seq = next_sequence_number(md)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        timestamp_ms=timestamp_ms,
        parent_snapshot_id=None if parent is None else parent.snapshot_id,
        sequence_number=seq,
        manifest_list=manifest_list.path,
        summary=dict(summary),
        schema_id=md.current_schema_id,
        first_row_id=md.next_row_id if v >= 3 else None,
        added_rows=manifest_list.added_rows if v >= 3 else None,
        sequence_number_written=v >= 2,
    )
    old_ref = md.snapshot_refs.get(branch)
    ref = SnapshotRef(snapshot_id, "branch") if old_ref is None else replace(old_ref, snapshot_id=snapshot_id)
    changes: dict[str, object] = {
        "snapshots": (*md.snapshots, snapshot),
        # from md.refs: a main left implied (no refs written) is written beside the branch (Java implies it
        # only where no refs are written)
        "snapshot_refs": {**md.refs, branch: ref},
        "last_updated_ms": timestamp_ms,
        "metadata_log": metadata_log(md, base_location),
    }
    if v >= 2:
        changes["last_sequence_number"] = seq
    if v >= 3:
        changes["next_row_id"] = manifest_list.next_row_id
    if branch == MAIN_BRANCH:
        changes["current_snapshot_id"] = snapshot_id
        changes["snapshot_log"] = (*md.snapshot_log, SnapshotLogEntry(timestamp_ms, snapshot_id))
    return replace(md, **changes)  # type: ignore[arg-type]


def previous_versions_max(properties: Mapping[str, str]) -> int:
    """``write.metadata.previous-versions-max`` (default 100; below 1 keeps 1, as Java)."""
    return max(int_property(properties, PREVIOUS_VERSIONS_MAX, 100, minimum=None), 1)


def metadata_log(
    md: TableMetadata, base_location: str, properties: Mapping[str, str] | None = None
) -> tuple[MetadataLogEntry, ...]:
    """``md``'s ``metadata-log`` with ``base_location`` (``md``'s own file) appended, the newest
    ``write.metadata.previous-versions-max`` kept, read from ``properties``: the new metadata's, as Java's
    TableMetadata.Builder (default ``md``'s; a bad value set earlier cannot block the update fixing it)."""
    keep = previous_versions_max(md.properties if properties is None else properties)
    log = (*md.metadata_log, MetadataLogEntry(md.last_updated_ms, base_location))
    return log[-keep:]


def delete_after_commit(properties: Mapping[str, str]) -> bool:
    """``write.metadata.delete-after-commit.enabled`` (default false); InvalidProperty if malformed."""
    return bool_property(properties, DELETE_AFTER_COMMIT, False)


def delete_removed_metadata_files(io: FileIO, base: TableMetadata, new: TableMetadata) -> tuple[str, ...]:
    """With ``write.metadata.delete-after-commit.enabled`` (default false), delete the metadata files of
    ``base``'s ``metadata-log`` that ``new``'s no longer lists (trimmed by previous-versions-max), after
    ``new`` was committed, as Java's table operations do; a failure is logged, not raised (the commit
    landed). The paths deleted."""
    try:
        enabled = delete_after_commit(new.properties)
    except InvalidProperty as exc:  # set before it was checked: never raised once the commit landed
        _log.warning("table %s: old metadata files kept: %s", new.location, exc)
        return ()
    if not enabled:
        return ()
    kept = {e.metadata_file for e in new.metadata_log}
    deleted = []
    for entry in base.metadata_log:
        if entry.metadata_file in kept:
            continue
        try:
            io.delete(io.resolve(entry.metadata_file), missing_ok=True)
            deleted.append(entry.metadata_file)
        except Exception as exc:  # any: the commit landed (an unreadable scheme, a permission error, ...)
            _log.warning(
                "table %s: could not delete old metadata file %s: %s", new.location, entry.metadata_file, exc
            )
    return tuple(deleted)


def metadata_dir(md: TableMetadata, *, file_system_table: bool) -> str:
    """Where new metadata files, manifest lists and manifests go: ``write.metadata.path`` when set, as
    Java's metastore table operations; a file-system (Hadoop layout) table keeps them in
    ``<location>/metadata``, where its version hint and ``v<N>.metadata.json`` files are found."""
    custom = md.properties.get(METADATA_PATH, "").strip()
    if custom and not file_system_table:
        return custom.rstrip("/")
    return f"{md.location.rstrip('/')}/metadata"


def metadata_path(md: TableMetadata, base_location: str | None, *, file_system_table: bool) -> str:
    """The recorded path of the next metadata file of the table (see the module doc)."""
    codec = md.properties.get(COMPRESSION_CODEC, "none").strip().lower()
    if codec not in ("none", "gzip"):
        raise UnsupportedFeature(f"table property {COMPRESSION_CODEC}={codec!r}: expected none or gzip")
    suffix = ".gz.metadata.json" if codec == "gzip" else ".metadata.json"
    directory = metadata_dir(md, file_system_table=file_system_table)
    if file_system_table:
        return f"{directory}/{uuid.uuid4()}{suffix}"
    version = 0
    if base_location is not None:
        m = _VERSION.match(base_location.rstrip("/").rsplit("/", 1)[-1])
        version = int(m.group(1)) + 1 if m else len(md.metadata_log) + 1
    return f"{directory}/{version:05d}-{uuid.uuid4()}{suffix}"


def write_metadata(io: FileIO, path: str, md: TableMetadata) -> None:
    """Write ``md`` at ``path`` (create-exclusive); refused when its refs are ones a reader refuses (a ref
    naming a snapshot ``md`` lacks, a ``main`` that is a tag): nothing is written."""
    try:
        check_table_refs(md.current_snapshot_id, md.snapshot_refs, md.snapshots_by_id)
    except MetadataError as exc:
        raise MetadataError(
            f"table {md.location}: refusing to write metadata a reader would refuse: {exc}"
        ) from None
    data = json.dumps(metadata_to_json(md), separators=(",", ":")).encode("utf-8")
    io.write_bytes(io.resolve(path), gzip.compress(data) if path.endswith(".gz.metadata.json") else data)
