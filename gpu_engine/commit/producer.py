"""The snapshot producer: commit a :class:`~gpu_engine.commit.update.SnapshotUpdate` to a table.

Each attempt builds the new snapshot on the table's current metadata (manifests, manifest list, summary,
metadata file; :mod:`.manifest_set`, :mod:`.summary`, :mod:`.table_update`) and asks the catalog to swap
the table's pointer from the base metadata file to the new one. A lost race (:class:`CommitConflict`)
refreshes the table, re-runs validation and re-applies the change, waiting with exponential backoff and
jitter (``commit.retry.*``, :mod:`.retry`) until the retries or the total timeout run out.

Files: new manifests for the added files are written once and reused by every attempt; rewritten
manifests, manifest lists and metadata files are written per attempt. After success the files of failed
attempts are deleted (never one the committed snapshot references); after a definite failure every file
the commit wrote is deleted and the error raised; after :class:`CommitStateUnknown` nothing is deleted,
since the new snapshot may be the table's current state.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import (
    CommitConflict,
    CommitStateUnknown,
    GpuEngineError,
    ManifestError,
    UnsupportedFeature,
    ValidationError,
)
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifest_write import ManifestEntry, write_manifest_list
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import record_to_json, snapshot_to_json
from ..io.fileio import FileIO
from . import manifest_set, table_update
from .entries import snapshot_manifests
from .manifest_merge import MergePolicy, merge_manifests
from .own_location import check_own_location
from .retry import RetryPolicy
from .summary import partition_paths, snapshot_summary, summary_partition_limit
from .update import CommitResult, Faults, SnapshotUpdate

if TYPE_CHECKING:
    from ..catalog.base import Catalog
    from ..table import Table

_log = logging.getLogger("gpu_engine.commit")


def _no_faults(stage: str) -> None:
    return None


ENCRYPTION_KEY_ID = "encryption.key-id"  # Java's TableProperties.ENCRYPTION_TABLE_KEY


def check_committable(table: Table, *, writes_files: bool = True) -> Catalog:
    """The catalog that commits ``table``; :class:`UnsupportedFeature` when it cannot be committed here.
    ``writes_files``: the commit writes data, delete or manifest files, which an encrypted table (Java's
    ``encryption.key-id``) needs encrypted: refused, rather than written in plaintext."""
    key = table.properties.get(ENCRYPTION_KEY_ID)
    if writes_files and (key is not None or table.metadata.encryption_keys):
        raise UnsupportedFeature(
            f"table {table.location} is encrypted (table property {ENCRYPTION_KEY_ID}={key!r}): gpu-engine "
            "writes no encrypted files, so it does not write to it"
        )
    catalog = table.catalog
    if catalog is None:
        raise UnsupportedFeature(
            f"table {table.metadata_location} was loaded from a metadata file and has no catalog to commit "
            "to: load its table directory (gpu_engine.load_table(dir)) or load it from a catalog"
        )
    if table.io.path_map:
        raise UnsupportedFeature(
            f"table {table.location} is read through a path map ({table.io.path_map.prefixes}); "
            "writing to it would mix old and new path spellings: commit where its paths are real"
        )
    catalog.require_commits_to(table)
    if not is_rest_catalog(catalog):
        check_own_location(table, file_system_table=is_file_system_catalog(catalog))
    return catalog


def is_rest_catalog(catalog: Catalog) -> bool:
    from ..catalog.rest import RestCatalog

    return isinstance(catalog, RestCatalog)


def is_file_system_catalog(catalog: Catalog) -> bool:
    from ..catalog.filesystem import FileSystemCatalog

    return isinstance(catalog, FileSystemCatalog)


@dataclass
class _Files:
    """Every file a commit wrote, by attempt; the added manifests are shared by all attempts."""

    added: list[str] = field(default_factory=list)
    attempts: list[list[str]] = field(default_factory=list)

    def all(self) -> list[str]:
        return [*self.added, *(p for a in self.attempts for p in a)]


def commit(
    table: Table,
    update: SnapshotUpdate,
    *,
    branch: str = "main",
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
    owned: Sequence[str] = (),
) -> CommitResult:
    """Commit ``update`` as a new snapshot at the head of ``branch``; ``table`` moves to the new metadata.

    Raises the validation's error (nothing committed), :class:`CommitConflict` when the retries run out
    (nothing committed, everything written deleted), :class:`CommitStateUnknown` (nothing deleted), or
    the error of the stage that failed (nothing committed, everything written deleted). ``owned``: files
    the caller wrote for this commit only (an append's data files), deleted with the commit's own files
    when it definitely failed.
    """
    catalog = check_committable(table)
    fault = faults or _no_faults
    producer = _Producer(table, catalog, update, branch, fault)
    attempt = 0
    try:
        policy = RetryPolicy.from_properties(table.properties)
        deadline = time.monotonic() + policy.total_timeout_ms / 1000.0
        while True:
            attempt += 1
            if attempt == 1 and is_rest_catalog(catalog):
                # REST requirements assert the branch's head only: a snapshot made of a handle behind
                # the table (another branch committed since) carries a stale sequence number and row id,
                # which the server refuses; Java's producers refresh before every attempt
                table.refresh()
            try:
                return producer.attempt(attempt)
            except (CommitConflict, ManifestError) as exc:
                # a manifest gone while the attempt read its base (another writer expired the snapshot
                # this handle started from) is a lost race too, once the table has moved on
                if isinstance(exc, ManifestError) and not moved_on(catalog, table):
                    raise
                if attempt > policy.num_retries or time.monotonic() >= deadline:
                    raise CommitConflict(
                        f"commit to {table.location} failed after {attempt} attempt(s): {exc}"
                    ) from exc
                _log.debug("commit attempt %d lost a race: %s", attempt, exc)
            sleep(min(policy.wait_s(attempt), max(deadline - time.monotonic(), 0.0)))
            table.refresh()
    except CommitStateUnknown:
        raise
    except BaseException:
        # during the swap the outcome is unknown; after it the commit landed and its files are the
        # table's (an interruption of the clean-up afterwards must not delete them)
        if not producer.swapping and not producer.landed:
            delete_files(table.io, [*producer.files.all(), *owned], fault=None)
        raise


def moved_on(catalog: Catalog, table: Table) -> bool:
    """Whether the catalog's current metadata of ``table`` is another than the handle's (a manifest gone
    while an attempt read the handle's base: another writer expired the snapshot it started from)."""
    return catalog.current_metadata_location(table.identifier) != table.metadata_location


class _Producer:
    def __init__(self, table: Table, catalog: Catalog, update: SnapshotUpdate, branch: str, faults: Faults):
        self.table, self.catalog, self.update = table, catalog, update
        self.branch, self.faults = branch, faults
        self.swapping = False  # while the catalog swap runs, an interruption leaves the outcome unknown
        self.landed = False  # the swap succeeded: from here on nothing this commit wrote is deleted
        self.files = _Files()
        self.commit_id = uuid.uuid4()
        self.table_uuid = table.metadata.table_uuid
        self.snapshot_id = table_update.new_snapshot_id(table.metadata)
        self.added: tuple[ManifestFile, ...] | None = None
        self.added_version = 0  # the format version the added manifests were written for
        self.count = 0

    def _manifest_path(self) -> str:
        self.count += 1
        return f"{self._metadata_dir(self.table.metadata)}/{self.commit_id}-m{self.count - 1}.avro"

    def _metadata_dir(self, md: TableMetadata) -> str:
        return table_update.metadata_dir(md, file_system_table=is_file_system_catalog(self.catalog))

    def attempt(self, attempt: int) -> CommitResult:
        table = self.table
        base, base_location, io = table.metadata, table.metadata_location, table.io
        written: list[str] = []
        self.files.attempts.append(written)
        if base.table_uuid != self.table_uuid:
            raise ValidationError(
                f"table {base.location} was replaced: its uuid is now {base.table_uuid}, "
                f"was {self.table_uuid}"
            )
        if attempt > 1:  # the table was refreshed: another writer may have made it encrypted meanwhile
            check_committable(table)
        if self.snapshot_id in base.snapshots_by_id:  # a concurrent writer drew the same id: start over
            self.snapshot_id = table_update.new_snapshot_id(base)
            self.added = None
        if self.added_version != base.format_version:  # upgraded meanwhile: a v1 manifest's sequence
            self.added = None  # number 0 would have been kept for its files (read before earlier deletes)
        if self.update.validate is not None:
            self.update.validate(base)
        given = self.update.data_sequence_number
        if given is not None and base.format_version >= 2:
            upcoming = table_update.next_sequence_number(base)
            if not 0 <= given <= upcoming:  # one to come: deletes committed later would not apply to it
                raise ValidationError(
                    f"commit to {base.location}: data sequence number {given} for the added files lies past "
                    f"this commit's {upcoming}: later deletes would not apply to them"
                )
        parent = table_update.parent_of(base, self.branch)
        self._check_content(base)
        if self.added is None:
            self.added = manifest_set.write_added(
                io, base, self.update.added, snapshot_id=self.snapshot_id, new_path=self._manifest_path,
                faults=self.faults, written=self.files.added,
                data_sequence_number=self.update.data_sequence_number if base.format_version >= 2 else None,
            )  # fmt: skip
            self.added_version = base.format_version
        existing = () if parent is None else snapshot_manifests(io, parent)
        own_entries: dict[str, list[ManifestEntry]] = {}  # the merge reuses them instead of reading back
        kept, removed, _, processed = manifest_set.filter_existing(
            io, base, existing, self.update.removed, snapshot_id=self.snapshot_id,
            new_path=self._manifest_path, faults=self.faults, written=written, rewritten_entries=own_entries,
            removed_from=self.update.removed_from,
        )  # fmt: skip
        # only manifests with live files, or written by this commit, carry on (as Java's producers): a
        # manifest an earlier commit left holding DELETED entries only is history
        kept = [
            m
            for m in kept
            if m.has_added_files() or m.has_existing_files() or m.added_snapshot_id == self.snapshot_id
        ]
        if self.update.manifest_rewrite is not None:
            manifests, rewritten = self.update.manifest_rewrite(
                io, base, kept, snapshot_id=self.snapshot_id, new_path=self._manifest_path,
                faults=self.faults, written=written,
            )  # fmt: skip
        else:
            merged = merge_manifests(
                io, base, (*self.added, *kept), policy=MergePolicy.from_properties(base.properties),
                snapshot_id=self.snapshot_id, new_path=self._manifest_path, faults=self.faults,
                written=written, known=own_entries,
            )  # fmt: skip
            manifests, rewritten = merged.manifests, merged.entries_processed
        seq = table_update.next_sequence_number(base)
        list_path = f"{self._metadata_dir(base)}/snap-{self.snapshot_id}-{attempt}-{self.commit_id}.avro"
        self.faults("manifest-list")
        listed = write_manifest_list(
            io, io.resolve(list_path), format_version=base.format_version, snapshot_id=self.snapshot_id,
            parent_snapshot_id=None if parent is None else parent.snapshot_id,
            sequence_number=seq if base.format_version >= 2 else None, manifests=manifests,
            first_row_id=base.next_row_id if base.format_version >= 3 else None,
        )  # fmt: skip
        written.append(list_path)
        listed = replace(listed, path=list_path)
        summary = snapshot_summary(
            self.update.operation, added=self.update.added, removed=removed,
            parent=None if parent is None else parent.summary, has_parent=parent is not None,
            extra={
                **self.update.summary,
                **_manifest_counts(existing, manifests),
                "entries-processed": str(processed + rewritten),
            },
            partition_path=partition_paths(base), partition_limit=summary_partition_limit(base.properties),
        )  # fmt: skip
        timestamp = table_update.now_ms(base)
        new_md = table_update.with_snapshot(
            base, base_location, snapshot_id=self.snapshot_id, branch=self.branch, timestamp_ms=timestamp,
            summary=summary, manifest_list=listed,
        )  # fmt: skip
        path = None  # the metadata file this attempt writes
        if is_rest_catalog(self.catalog):  # the server writes the metadata file from our updates
            self.faults("metadata")
            self.faults("swap")
            new_md, location = self._rest_commit(base, new_md)
        else:
            path = table_update.metadata_path(
                new_md, base_location, file_system_table=is_file_system_catalog(self.catalog)
            )
            self.faults("metadata")
            table_update.write_metadata(io, path, new_md)
            written.append(path)
            self.faults("swap")
            location = self._swap(base_location, path)
        table._advance(new_md, location)
        if path is not None:
            table_update.delete_removed_metadata_files(io, base, new_md)
        referenced = {*(m.manifest_path for m in manifests), list_path, location, path}
        orphaned = self._clean_unreferenced(referenced)
        return CommitResult(
            snapshot_id=self.snapshot_id,
            sequence_number=seq,
            metadata_location=location,
            manifest_list=list_path,
            summary=summary,
            attempts=attempt,
            orphaned=orphaned,
        )

    def _check_content(self, base: TableMetadata) -> None:
        if base.format_version == 1 and any(f.content != 0 for f in self.update.added):
            raise ValidationError(f"table {base.location} is format version 1: it has no delete files")
        if base.format_version >= 3 and any(
            f.content == 1 and f.file_format != "PUFFIN" for f in self.update.added
        ):
            raise ValidationError(  # the spec: position delete files must not be added to v3 tables
                f"table {base.location} is format version {base.format_version} (upgraded since this commit "
                "was planned?): it takes deletion vectors, not position delete files; run it again"
            )
        for f in self.update.added:
            base.spec_by_id(f.spec_id)

    def _swap(self, base_location: str, new_location: str) -> str:
        """The catalog's swap; an error other than the catalog's own (or an interruption such as
        KeyboardInterrupt) leaves the outcome unknown, and nothing is cleaned up."""
        self.swapping = True
        try:
            location = self.catalog.commit_metadata(self.table.identifier, base_location, new_location)
        except (CommitConflict, CommitStateUnknown, GpuEngineError):
            self.swapping = False  # the catalog knows: CommitStateUnknown passes through commit() untouched
            raise
        except Exception as exc:
            raise CommitStateUnknown(
                f"commit to {self.table.location}: the catalog swap to {new_location} failed with "
                f"{type(exc).__name__}: {exc}; whether it landed is unknown"
            ) from exc
        self.landed = True  # before swapping ends: an interruption between the two deletes nothing
        self.swapping = False
        return location

    def _rest_commit(self, base: TableMetadata, new_md: TableMetadata) -> tuple[TableMetadata, str]:
        """The REST protocol's commit: ``add-snapshot`` and ``set-snapshot-ref`` updates, required to
        apply to the same table (uuid) with the branch still where ``base`` has it (or still absent, when
        this commit creates it); the server's metadata back."""
        from ..catalog.rest import RestCatalog

        assert isinstance(self.catalog, RestCatalog)
        snapshot = new_md.snapshots_by_id[self.snapshot_id]
        head = new_md.refs[self.branch]  # the branch's retention settings travel with it, as in Java
        started = base.refs.get(self.branch)  # a branch created by this commit must not exist: null
        requirements: list[dict[str, Any]] = [
            *table_uuid_requirement(base),
            {"type": "assert-ref-snapshot-id", "ref": self.branch,
             "snapshot-id": None if started is None else started.snapshot_id},
        ]  # fmt: skip
        updates: list[dict[str, Any]] = [
            {"action": "add-snapshot", "snapshot": snapshot_to_json(snapshot)},
            {"action": "set-snapshot-ref", "ref-name": self.branch, **record_to_json(head)},
        ]  # fmt: skip
        self.swapping = True
        try:
            committed = self.catalog.commit_table(
                self.table.identifier, requirements=requirements, updates=updates
            )
        except (CommitConflict, CommitStateUnknown, GpuEngineError):
            self.swapping = False
            raise
        except Exception as exc:
            raise CommitStateUnknown(
                f"commit to {self.table.location}: the REST commit failed with {type(exc).__name__}: {exc}; "
                "whether it landed is unknown"
            ) from exc
        self.landed = True  # before swapping ends: an interruption between the two deletes nothing
        self.swapping = False
        landed = committed.metadata.snapshots_by_id.get(self.snapshot_id)
        if landed is None or committed.metadata.snapshot_refs.get(self.branch, None) is None:
            raise CommitStateUnknown(
                f"commit to {self.table.location}: the REST server's answer lacks snapshot {self.snapshot_id}"
            )
        return committed.metadata, committed.metadata_location

    def _clean_unreferenced(self, referenced: set[str | None]) -> tuple[str, ...]:
        """Delete what this commit wrote that the landed snapshot does not reference: the files of failed
        attempts, and manifests merged into others (see :mod:`.manifest_merge`)."""
        unused = [p for p in self.files.all() if p not in referenced]
        return delete_files(self.table.io, unused, fault=self.faults)


def delete_files(io: FileIO, paths: list[str], *, fault: Faults | None) -> tuple[str, ...]:
    """Delete ``paths`` (missing ones are fine); the paths that could not be deleted."""
    if not paths:
        return ()
    try:
        if fault is not None:
            fault("cleanup")
    except Exception as exc:
        _log.warning("commit cleanup skipped (%s): %d file(s) left behind", exc, len(paths))
        return tuple(paths)
    left = []
    for p in paths:
        try:
            io.delete(io.resolve(p), missing_ok=True)
        except Exception as exc:
            _log.warning("commit cleanup: cannot delete %s: %s", p, exc)
            left.append(p)
    return tuple(left)


def _manifest_counts(parent: Sequence[ManifestFile], manifests: Sequence[ManifestFile]) -> dict[str, str]:
    """The summary's manifest counts: the parent's manifests listed again as they were (kept), listed no
    more (replaced: rewritten or merged), and manifests this commit wrote (created)."""
    before = {m.manifest_path for m in parent}
    now = {m.manifest_path for m in manifests}
    kept = len(before & now)
    return {
        "manifests-created": str(len(now) - kept),
        "manifests-kept": str(kept),
        "manifests-replaced": str(len(before - now)),
    }


def table_uuid_requirement(base: TableMetadata) -> list[dict[str, Any]]:
    """``assert-table-uuid`` for ``base``; none for a v1 table without a uuid (the spec's requirement
    holds a string: a null would be refused)."""
    return [] if base.table_uuid is None else [{"type": "assert-table-uuid", "uuid": base.table_uuid}]
