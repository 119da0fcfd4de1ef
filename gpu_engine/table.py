"""A table handle: identifier, current metadata and where it was read from, the IO (with its path map)
and the catalog that holds the table's pointer (``None`` for a table read from a metadata file).

Tables without a catalog are loaded by :func:`gpu_engine.table_load.load_table` on a table directory
(Hadoop layout, current metadata found as in :mod:`gpu_engine.catalog.filesystem`) or on a metadata JSON
file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _args
from .backend.select import check_backend_name, choose
from .errors import MetadataError, PlanningError, UnsupportedFeature, ValidationError
from .expressions import TRUE
from .iceberg.metadata import TableMetadata, parse_metadata
from .iceberg.partitioning import PartitionSpec
from .iceberg.schema import Schema
from .io.fileio import FileIO
from .planning.snapshot_range import SnapshotRange

if TYPE_CHECKING:
    import datetime

    import pyarrow as pa

    from .catalog.base import Catalog
    from .changelog import ChangelogScan
    from .commit import AppendResult, CommitResult, SnapshotUpdate
    from .commit.compact import CompactionProgress, CompactionResult
    from .commit.delete import DeleteResult
    from .commit.delete_rewrite import DeleteRewriteResult
    from .commit.expire import ExpireResult
    from .commit.manifest_rewrite import ManifestRewriteResult
    from .commit.overwrite import OverwriteResult
    from .commit.partition_overwrite import PartitionOverwriteResult
    from .commit.properties_update import PropertiesUpdate
    from .commit.refs_update import RefsUpdate
    from .commit.schema_update import SchemaUpdate
    from .commit.spec_update import SpecUpdate
    from .commit.update import Faults
    from .commit.upsert import UpsertResult
    from .expressions import Expression
    from .iceberg.sorting import SortOrder
    from .inspect import InspectTable
    from .io.parquet_write import Data
    from .scan import TableScan


class Table:
    """A loaded table. Fields are read-only; :meth:`refresh` moves it to the catalog's current metadata."""

    __slots__ = ("_catalog", "_identifier", "_io", "_state")

    def __init__(
        self,
        *,
        identifier: tuple[str, ...],
        metadata: TableMetadata,
        metadata_location: str,
        io: FileIO,
        catalog: Catalog | None = None,
    ) -> None:
        self._identifier = tuple(identifier)
        self._state = (metadata, metadata_location)
        self._io = io
        self._catalog = catalog

    def __repr__(self) -> str:
        catalog = f", catalog={self._catalog.name!r}" if self._catalog is not None else ""
        return f"Table({'.'.join(self._identifier)!r}, metadata_location={self.metadata_location!r}{catalog})"

    @property
    def identifier(self) -> tuple[str, ...]:
        return self._identifier

    @property
    def metadata(self) -> TableMetadata:
        return self._state[0]

    @property
    def metadata_location(self) -> str:
        """The current metadata file as the catalog records it (what other readers are pointed at)."""
        return self._state[1]

    @property
    def io(self) -> FileIO:
        """The table's IO; ``io.resolve(path)`` maps a path recorded in metadata to where the file is now."""
        return self._io

    @property
    def catalog(self) -> Catalog | None:
        return self._catalog

    @property
    def location(self) -> str:
        """The table location recorded in its metadata (``io.resolve(location)``: where it is now)."""
        return self.metadata.location

    @property
    def format_version(self) -> int:
        return self.metadata.format_version

    @property
    def properties(self) -> Mapping[str, str]:
        return self.metadata.properties

    def schema(self) -> Schema:
        """The current schema."""
        return self.metadata.schema

    def spec(self) -> PartitionSpec:
        """The default partition spec."""
        return self.metadata.spec

    def scan(
        self,
        *,
        filter: str | Expression = TRUE,
        columns: Sequence[str] | None = None,
        snapshot_id: int | None = None,
        as_of: int | None = None,
        ref: str | None = None,
        case_sensitive: bool = True,
        backend: str = "auto",
        limit: int | None = None,
    ) -> TableScan:
        """A scan of this table: ``filter`` as a string (``"ts >= '2024-01-01' and id in (1, 2)"``) or an
        expression; ``columns`` by name (dotted for nested fields; metadata columns such as ``_file``,
        ``_pos``, ``_row_id`` too); at most one of ``snapshot_id``, ``as_of`` (ms since the epoch) and
        ``ref``; ``backend`` "auto", "cpu" or "cuda"; at most ``limit`` rows."""
        from .scan import new_scan

        return new_scan(
            self,
            filter=filter,
            columns=columns,
            snapshot_id=snapshot_id,
            as_of=as_of,
            ref=ref,
            case_sensitive=case_sensitive,
            backend=backend,
            limit=limit,
        )

    def incremental_append_scan(
        self,
        from_snapshot_id: int | None = None,
        *,
        from_inclusive: bool = False,
        to_snapshot_id: int | None = None,
        branch: str | None = None,
        filter: str | Expression = TRUE,
        columns: Sequence[str] | None = None,
        case_sensitive: bool = True,
        backend: str = "auto",
        limit: int | None = None,
    ) -> TableScan:
        """The rows the ``append`` snapshots after ``from_snapshot_id`` (or from it, ``from_inclusive``;
        from the oldest ancestor when None) up to ``to_snapshot_id`` (else the head of ``branch``, else
        the current snapshot) added, as appended, in the current schema: Iceberg Java's
        ``IncrementalAppendScan``. Other snapshots (overwrite, delete, replace) are passed over and no
        delete file applies. The other arguments are :meth:`scan`'s."""
        from .scan import new_scan

        to_snapshot_id, branch = self._incremental_end(to_snapshot_id, branch)
        return new_scan(
            self,
            filter=filter,
            columns=columns,
            snapshot_id=to_snapshot_id,
            ref=branch,
            case_sensitive=case_sensitive,
            backend=backend,
            limit=limit,
            appends_since=SnapshotRange(from_snapshot_id, from_inclusive),
        )

    def incremental_changelog_scan(
        self,
        from_snapshot_id: int | None = None,
        *,
        from_inclusive: bool = False,
        to_snapshot_id: int | None = None,
        branch: str | None = None,
        filter: str | Expression = TRUE,
        columns: Sequence[str] | None = None,
        case_sensitive: bool = True,
        backend: str = "auto",
        remove_carry_overs: bool = True,
        compute_updates: bool = False,
        identifier_columns: Sequence[str] | None = None,
        net_changes: bool = False,
    ) -> ChangelogScan:
        """The rows each snapshot after ``from_snapshot_id`` (range as :meth:`incremental_append_scan`)
        inserted and deleted, with ``_change_type``, ``_change_ordinal`` and ``_commit_snapshot_id``.
        Unlike Iceberg Java's ``IncrementalChangelogScan``, snapshots with delete files (position,
        equality, deletion vectors) are supported; ``replace`` snapshots change nothing and are passed
        over. Rows read in the current schema; ``filter`` keeps the changed rows matching it.
        ``remove_carry_overs``: rows a copy-on-write rewrite deleted and inserted unchanged cancel out
        (compared on the requested data columns, on every column when none is requested), as in Spark's
        ``create_changelog_view``.
        ``compute_updates``: a key (``identifier_columns``, else the table's identifier fields) that a
        snapshot both deleted and inserted becomes an ``UPDATE_BEFORE`` row followed by its
        ``UPDATE_AFTER``. ``net_changes``: equal DELETEs and INSERTs cancel across the whole range, leaving
        the difference between its first parent and its last snapshot (not with ``compute_updates``).
        ``identifier_columns`` are checked here, before anything is read (a PlanningError or
        UnsupportedFeature naming them): they must be among the returned data columns, and are refused
        without ``compute_updates``, which alone uses them."""
        from .changelog import ChangelogScan, checked_update_keys
        from .planning.scan import ScanOptions
        from .scan import scan_columns

        check_backend_name(backend)
        remove_carry_overs, compute_updates, net_changes = (  # "no" would be truthy
            _args.boolean(v, name, PlanningError)
            for v, name in ((remove_carry_overs, "remove_carry_overs"), (compute_updates, "compute_updates"),
                            (net_changes, "net_changes"))
        )  # fmt: skip
        to_snapshot_id, branch = self._incremental_end(to_snapshot_id, branch)
        options = ScanOptions(filter, to_snapshot_id, None, branch, case_sensitive)
        since = SnapshotRange(from_snapshot_id, from_inclusive)
        picked = scan_columns(columns)
        if net_changes and compute_updates:
            raise UnsupportedFeature("net_changes cannot be combined with compute_updates: choose one")
        keys = checked_update_keys(self.metadata, picked, identifier_columns, compute_updates, case_sensitive)
        return ChangelogScan(self, options, since, picked, backend, remove_carry_overs, keys, net_changes)

    def _incremental_end(
        self, to_snapshot_id: int | None, branch: str | None
    ) -> tuple[int | None, str | None]:
        """Where an incremental scan ends: ``to_snapshot_id`` on ``branch`` (both given) when it is one of
        the branch head's ancestors, as Java's ``toSnapshot`` with ``useBranch``; else what was given."""
        if to_snapshot_id is None or branch is None:
            return to_snapshot_id, branch
        end = _args.integer(to_snapshot_id, "to_snapshot_id", PlanningError)
        md = self.metadata
        ref = md.refs.get(branch)
        if ref is None or ref.type != "branch":
            raise PlanningError(f"incremental scan branch={branch!r}: the table has no such branch")
        if end not in md.ancestor_ids(ref.snapshot_id):
            raise PlanningError(
                f"incremental scan to_snapshot_id={end}: not an ancestor of branch {branch!r} (head "
                f"{ref.snapshot_id})"
            )
        return end, None

    def refresh(self) -> Table:
        """Reload the current metadata (from the catalog, or re-read a static metadata file); returns self.
        Through a REST catalog the table's IO is renewed too (its config and vended credentials, which
        expire), keeping this handle's path map."""
        if self._catalog is None:
            self._state = (read_metadata(self._io, self.metadata_location), self.metadata_location)
            return self
        location, loaded = self._catalog.reload(self._identifier)
        io = self._io if loaded is None else loaded.io.with_path_map(self._io.path_map)
        if location != self.metadata_location:
            metadata = loaded.metadata if loaded is not None else read_metadata(io, location)
            before, now = self.metadata.table_uuid, metadata.table_uuid
            if before is not None and now is not None and before != now:  # Java's refresh: the same check
                raise ValidationError(
                    f"table {'.'.join(self._identifier)} was replaced (dropped and created again?): its uuid "
                    f"is now {now}, this handle's is {before}; load it again"
                )
            self._state = (metadata, location)
        self._io = io
        return self

    def append(
        self,
        data: Data | Any,
        *,
        branch: str = "main",
        backend: str = "auto",
        merge_schema: bool = False,
        faults: Faults | None = None,
    ) -> AppendResult:
        """Write ``data`` (an Arrow table, batch, reader or iterable of batches; or a cuDF DataFrame, encoded
        on the GPU by cuDF's Parquet writer, see :mod:`gpu_engine.execute.frame_append`) as data files and
        commit them as an ``append`` snapshot; this handle then points at the new metadata.
        ``merge_schema``: first add the data's new columns and widen types (required columns stay
        required; Arrow data only), see :mod:`gpu_engine.commit.append`. ``faults``: a test hook (see
        :mod:`gpu_engine.commit.producer`)."""
        from .commit.append import append

        choose(backend)  # a bad name, or 'cuda' without a device, fails whether or not a kernel runs
        return append(self, data, branch=branch, backend=backend, merge_schema=merge_schema, faults=faults)

    def overwrite(
        self,
        data: Data,
        filter: str | Expression = "true",
        *,
        branch: str = "main",
        backend: str = "auto",
        case_sensitive: bool = True,
        isolation: str | None = None,
        faults: Faults | None = None,
    ) -> OverwriteResult:
        """Replace the rows matching ``filter`` (default: all) with ``data`` in one ``overwrite`` snapshot:
        the old rows deleted as :meth:`delete` deletes them, the new ones written as :meth:`append` writes
        them. ``data``'s rows are not checked against ``filter`` (as PyIceberg's; Spark's static overwrite
        refuses rows outside it). ``isolation``: ``serializable`` (default; fails if rows matching
        ``filter`` were appended since the overwrite was planned) or ``snapshot``. See
        :mod:`gpu_engine.commit.overwrite`."""
        from .commit.overwrite import overwrite

        choose(backend)
        return overwrite(
            self, data, filter, branch=branch, backend=backend, case_sensitive=case_sensitive,
            isolation=isolation, faults=faults,
        )  # fmt: skip

    def dynamic_partition_overwrite(
        self,
        data: Data,
        *,
        branch: str = "main",
        backend: str = "auto",
        isolation: str | None = None,
        faults: Faults | None = None,
    ) -> PartitionOverwriteResult | None:
        """Write ``data`` with the default spec and replace every partition it lands in (their data and
        delete files; an unpartitioned table: all of it) in one ``overwrite`` snapshot, as Iceberg's
        ``ReplacePartitions``; None (nothing committed) when ``data`` has no rows. ``isolation``:
        ``serializable`` (default; fails if rows were appended to those partitions meanwhile) or
        ``snapshot``. See :mod:`gpu_engine.commit.partition_overwrite`."""
        from .commit.partition_overwrite import dynamic_partition_overwrite

        choose(backend)
        return dynamic_partition_overwrite(
            self, data, branch=branch, backend=backend, isolation=isolation, faults=faults
        )

    def delete(
        self,
        filter: str | Expression,
        *,
        branch: str = "main",
        backend: str = "auto",
        case_sensitive: bool = True,
        isolation: str | None = None,
        faults: Faults | None = None,
    ) -> DeleteResult:
        """Delete the rows matching ``filter`` by the table's ``write.delete.mode``: merge-on-read
        (default on v2/v3: position delete files in v2, deletion vectors in v3; a ``delete`` snapshot) or
        copy-on-write (default on v1: the data files with matches rewritten without them; an ``overwrite``
        snapshot). Data files left without live rows are removed; nothing is committed when no row
        matches. :class:`~gpu_engine.errors.ValidationError` when a concurrent commit removed a targeted
        data file or added deletes for one, or (``isolation`` ``serializable``, by default the table's
        ``write.delete.isolation-level``, itself serializable by default) appended rows that may match
        (the files written are deleted)."""
        from .commit.delete import delete

        choose(backend)
        return delete(
            self, filter, branch=branch, backend=backend, case_sensitive=case_sensitive,
            isolation=isolation, faults=faults,
        )  # fmt: skip

    def upsert(
        self,
        data: pa.Table | pa.RecordBatch,
        on: Sequence[str] | None = None,
        *,
        branch: str = "main",
        backend: str = "auto",
        faults: Faults | None = None,
    ) -> UpsertResult | None:
        """Update the rows whose ``on`` columns (default: the identifier fields) equal a row of ``data`` to
        that row and insert the others, in one ``overwrite`` snapshot of equality deletes and data files
        (merge-on-read, as Flink's upsert mode; nothing is read). The keys need the partition source
        columns; ``data`` may not repeat a key. None when ``data`` is empty. See
        :mod:`gpu_engine.commit.upsert`."""
        from .commit.upsert import upsert

        choose(backend)
        return upsert(self, data, on, branch=branch, backend=backend, faults=faults)

    def delete_rows(
        self,
        keys: pa.Table,
        on: Sequence[str] | None = None,
        *,
        branch: str = "main",
        backend: str = "auto",
        faults: Faults | None = None,
    ) -> DeleteResult:
        """Delete the rows whose ``on`` columns (default: the identifier fields) equal a row of ``keys``
        (NULL matches NULL) with equality delete files, as a ``delete`` snapshot; rows appended later with
        the same key stay."""
        from .commit.equality_delete import delete_rows

        choose(backend)
        return delete_rows(self, keys, on, branch=branch, backend=backend, faults=faults)

    def commit(
        self, update: SnapshotUpdate, *, branch: str = "main", faults: Faults | None = None
    ) -> CommitResult:
        """Commit ``update`` as a new snapshot of ``branch`` (retrying lost races); this handle then points at
        the new metadata."""
        from .commit.producer import commit

        return commit(self, update, branch=branch, faults=faults)

    def compact(
        self,
        strategy: str = "binpack",
        *,
        sort_order: str | Sequence[str] | SortOrder | None = None,
        options: Mapping[str, Any] | None = None,
        where: str | Expression | None = None,
        branch: str = "main",
        backend: str = "auto",
        dry_run: bool = False,
        progress: CompactionProgress | None = None,
        faults: Faults | None = None,
        parquet_io: str = "auto",
    ) -> CompactionResult:
        """Rewrite small files and merge-on-read deletes into target-sized files (Iceberg's
        ``rewrite_data_files``: ``options`` by Iceberg's names, e.g. ``{"min-input-files": "2"}``), as
        ``replace`` snapshots. ``strategy``: ``binpack``, ``sort`` (by ``sort_order`` or the table's) or
        ``zorder`` (``sort_order="a, b"``). ``dry_run``: plan only (``result.plan.explain()``).
        ``parquet_io``: ``auto`` (cuDF's GPU Parquet reader and writer on the CUDA backend where cuDF is
        installed), ``cudf``, ``pyarrow`` (host), ``arrow-frames`` (the cuDF path's steps with pyarrow);
        each group's result says who did and, where pyarrow stood in, why. See
        :mod:`gpu_engine.commit.compact`."""
        from .commit.compact import compact

        return compact(
            self, strategy=strategy, sort_order=sort_order, options=options, where=where, branch=branch,
            backend=backend, dry_run=dry_run, progress=progress, faults=faults, parquet_io=parquet_io,
        )  # fmt: skip

    def rewrite_position_deletes(
        self, *, options: Mapping[str, Any] | None = None, branch: str = "main", faults: Faults | None = None
    ) -> DeleteRewriteResult:
        """Rewrite position delete files and DVs keeping only positions that still apply: one position
        delete file per partition (v2), one DV per data file (v3: position delete files become DVs);
        dangling deletes are removed. ``options``: ``min-input-files`` (5), ``rewrite-all``. See
        :mod:`gpu_engine.commit.delete_rewrite`."""
        from .commit.delete_rewrite import rewrite_position_deletes

        return rewrite_position_deletes(self, options=options, branch=branch, faults=faults)

    def rewrite_manifests(
        self,
        *,
        spec_id: int | None = None,
        target_size_bytes: int | None = None,
        branch: str = "main",
        faults: Faults | None = None,
    ) -> ManifestRewriteResult:
        """Rewrite the manifests of ``branch`` into target-sized ones clustered by partition (Iceberg's
        ``rewrite_manifests``; ``target_size_bytes`` defaults to ``commit.manifest.target-size-bytes``),
        all specs' or ``spec_id``'s only. See :mod:`gpu_engine.commit.manifest_rewrite`."""
        from .commit.manifest_rewrite import rewrite_manifests

        return rewrite_manifests(
            self, spec_id=spec_id, target_size_bytes=target_size_bytes, branch=branch, faults=faults
        )

    def convert_equality_deletes(
        self, *, branch: str = "main", backend: str = "auto", faults: Faults | None = None
    ) -> DeleteRewriteResult:
        """Replace the equality deletes by the positions they delete: DVs (v3) or position delete files
        (v2), found by matching keys against the data files on ``backend``."""
        from .commit.delete_rewrite import convert_equality_deletes

        choose(backend)
        return convert_equality_deletes(self, branch=branch, backend=backend, faults=faults)

    def expire_snapshots(
        self,
        *,
        older_than: int | datetime.datetime | None = None,
        retain_last: int | None = None,
        snapshot_ids: Sequence[int] = (),
        faults: Faults | None = None,
    ) -> ExpireResult:
        """Expire snapshots by the table's and refs' retention policies (``older_than``: ms since the epoch
        or a datetime; ``retain_last``: keep at least this many per branch; ``snapshot_ids``: expire these
        too, whatever their age), then delete the files only the expired snapshots reached (see
        :mod:`gpu_engine.commit.expire`). ``faults``: a test hook (stages ``metadata``, ``swap``,
        ``cleanup``)."""
        from .commit.expire import expire_snapshots

        return expire_snapshots(
            self, older_than=older_than, retain_last=retain_last, snapshot_ids=snapshot_ids, faults=faults
        )

    def update_schema(self, *, case_sensitive: bool = True) -> SchemaUpdate:
        """Evolve the table's schema: add, rename, delete, promote columns; commit with ``commit()`` or by
        leaving a ``with`` block (see :mod:`gpu_engine.commit.schema_update`)."""
        from .commit.schema_update import SchemaUpdate

        return SchemaUpdate(self, case_sensitive=case_sensitive)

    def update_spec(self) -> SpecUpdate:
        """Evolve the table's partition spec: add, remove, rename fields; commit with ``commit()`` or by
        leaving a ``with`` block (see :mod:`gpu_engine.commit.spec_update`)."""
        from .commit.spec_update import SpecUpdate

        return SpecUpdate(self)

    def replace_sort_order(
        self, order: str | Sequence[str] | SortOrder, *, faults: Faults | None = None
    ) -> SortOrder:
        """Make ``order`` (``"id DESC NULLS LAST, bucket(16, name)"``; ``[]`` for unsorted) the table's sort
        order, the one ``compact("sort")`` uses by default; the committed order (see
        :mod:`gpu_engine.commit.sort_update`)."""
        from .commit.sort_update import SortOrderUpdate

        return SortOrderUpdate(self, order).commit(faults=faults)

    @property
    def inspect(self) -> InspectTable:
        """Metadata tables as Arrow tables: ``partitions()``, ``files()``, ``manifests()``, ``snapshots()``,
        ``refs()``, ``history()`` (see :mod:`gpu_engine.inspect`)."""
        from .inspect import InspectTable

        return InspectTable(self)

    def manage_snapshots(self) -> RefsUpdate:
        """Branches and tags to create, move (rollback, fast-forward) and remove together; commit it or use it
        as a ``with`` block (see :mod:`gpu_engine.commit.refs_update`)."""
        from .commit.refs_update import RefsUpdate

        return RefsUpdate(self)

    def update_properties(self) -> PropertiesUpdate:
        """Table properties to set and remove together, ``format-version`` to upgrade the table; commit it or
        use it as a ``with`` block (see :mod:`gpu_engine.commit.properties_update`)."""
        from .commit.properties_update import PropertiesUpdate

        return PropertiesUpdate(self)

    def remove_orphan_files(
        self, *, older_than: int | datetime.datetime | None = None, dry_run: bool = False
    ) -> list[str]:
        """Delete (unless ``dry_run``) and list the files under the table's data/ and metadata/ that no
        snapshot of the current metadata reaches and that are older than ``older_than`` (default: 3 days
        ago); local tables only (see :mod:`gpu_engine.commit.orphans`)."""
        from .commit.orphans import remove_orphan_files

        return remove_orphan_files(self, older_than=older_than, dry_run=dry_run)

    def _advance(self, metadata: TableMetadata, metadata_location: str) -> None:
        """Move this handle to metadata this process just committed (the commit path only)."""
        self._state = (metadata, metadata_location)

    def with_io(self, io: FileIO) -> Table:
        """A new handle on the same metadata with another IO (e.g. another path map)."""
        return Table(
            identifier=self._identifier,
            metadata=self.metadata,
            metadata_location=self.metadata_location,
            io=io,
            catalog=self._catalog,
        )


def read_metadata(io: FileIO, metadata_location: str) -> TableMetadata:
    """Parse the metadata file at ``metadata_location`` (a recorded path: resolved through ``io`` first)."""
    resolved = io.resolve(metadata_location)
    try:
        data = io.read_bytes(resolved)
    except FileNotFoundError as e:
        moved = f" (resolved to {resolved})" if resolved != metadata_location else ""
        raise MetadataError(f"metadata file {metadata_location}{moved} does not exist") from e
    return parse_metadata(data, source=resolved)


def read_table(
    identifier: tuple[str, ...], metadata_location: str, *, io: FileIO, catalog: Catalog | None
) -> Table:
    """A :class:`Table` whose current metadata is the file at ``metadata_location``."""
    return Table(
        identifier=identifier,
        metadata=read_metadata(io, metadata_location),
        metadata_location=metadata_location,
        io=io,
        catalog=catalog,
    )
