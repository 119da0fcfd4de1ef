"""Dynamic partition overwrites, Iceberg's ``ReplacePartitions`` (Spark's ``overwritePartitions()``,
``INSERT OVERWRITE`` in dynamic mode; PyIceberg's ``dynamic_partition_overwrite``): the new rows are
written with the table's default spec, and every partition they land in is replaced: its data files and
its delete files are removed, in one ``overwrite`` snapshot whose summary says ``replace-partitions``.

A partition is a (spec id, partition tuple) pair, compared as the spec compares partition values, so any
transform works (no filter is derived from the values). Files written with another spec are not replaced,
as in Java; an unpartitioned default spec replaces the whole table (every file of every spec).

Only the manifests that may list a file of a replaced partition are read: those of the default spec whose
partition summaries admit one of the new rows' partitions (Java's ``ManifestEvaluator`` rules).

Concurrency (:mod:`.isolation`): under ``serializable`` (the default) a data file appended since the plan
in a replaced partition fails the commit (those rows would have been replaced had the overwrite run after
them), as in Java; under ``snapshot`` it is kept (the overwrite ordered before that append), where Java's
``ReplacePartitions`` drops the partition again from the base it commits on and so removes it too: both
outcomes are some serial order. At both levels a delete file added meanwhile in a replaced partition fails
it, as does a file to remove that another commit removed (a compaction).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import GpuEngineError, ValidationError
from ..iceberg import serde
from ..iceberg import types as it
from ..iceberg.content_file import DATA, ContentFile
from ..iceberg.manifest_list import FieldSummary, ManifestFile
from ..iceberg.manifests import ADDED
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import PartitionKey, PartitionSpec, partition_key
from ..iceberg.snapshots import Snapshot
from ..io.fileio import FileIO
from ..io.parquet_write import Data, write_table_data
from .entries import live_entries, snapshot_manifests
from .isolation import SERIALIZABLE, isolation_level
from .producer import check_committable, commit, delete_files
from .removal_scope import RemovalScope
from .table_update import parent_of
from .update import CommitResult, Faults, Removed, SnapshotUpdate, file_key

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class PartitionOverwriteResult:
    """A dynamic partition overwrite that landed: the data files written and their rows, how many
    partitions were replaced, the files removed (recorded paths; delete files as entries), its commit."""

    files: tuple[ContentFile, ...]
    added_rows: int
    partitions: int
    removed_data_files: tuple[str, ...]
    removed_delete_files: tuple[ContentFile, ...]
    commit: CommitResult

    @property
    def snapshot_id(self) -> int:
        return self.commit.snapshot_id


def dynamic_partition_overwrite(
    table: Table,
    data: Data,
    *,
    branch: str = "main",
    backend: str = "auto",
    isolation: str | None = None,
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> PartitionOverwriteResult | None:
    """Write ``data`` and replace the partitions it lands in (see the module doc); None when ``data`` has
    no rows: no partition to replace, nothing committed (even on an unpartitioned table)."""
    check_committable(table)
    level = isolation_level(isolation, option="isolation")
    md, io = table.metadata, table.io
    head = parent_of(md, branch)  # a ref that takes no commit is refused before any file is written
    if faults is not None:
        faults("data")
    files = tuple(write_table_data(io, md, data, backend=backend))
    if not files:
        return None
    everything = md.spec.is_unpartitioned
    replaced = {partition_key(f.spec_id, f.partition) for f in files}
    try:
        live = [] if head is None else _live_files(io, md, head, None if everything else files)
    except BaseException:
        delete_files(io, [f.path for f in files], fault=None)
        raise
    gone = [f for f in live if everything or partition_key(f.spec_id, f.partition) in replaced]
    removed_data = [f.path for f in gone if f.content == DATA]
    removed_deletes = [f for f in gone if f.content != DATA]
    planned = None if head is None else head.snapshot_id
    removed: list[Removed] = [*removed_data, *(file_key(d) for d in removed_deletes)]

    def validate(base: TableMetadata) -> None:
        scope = None if everything else replaced
        _no_files_added_in(io, base, branch, planned, scope, data=level == SERIALIZABLE)

    scope = RemovalScope.of_files(md, data=[f for f in gone if f.content == DATA], deletes=removed_deletes)
    update = SnapshotUpdate(
        "overwrite", added=files, removed=removed, validate=validate, summary={"replace-partitions": "true"},
        removed_from=scope,
    )  # fmt: skip
    result = commit(table, update, branch=branch, faults=faults, sleep=sleep, owned=[f.path for f in files])
    return PartitionOverwriteResult(
        files=files,
        added_rows=sum(f.record_count for f in files),
        partitions=len(replaced),
        removed_data_files=tuple(removed_data),
        removed_delete_files=tuple(removed_deletes),
        commit=result,
    )


def _live_files(
    io: FileIO, md: TableMetadata, snapshot: Snapshot, written: Sequence[ContentFile] | None
) -> list[ContentFile]:
    """The live data and delete files of ``snapshot`` (recorded paths) that may share a partition with
    the ``written`` files (None: every file). Manifests of other specs, and those whose partition summaries
    rule out every written partition, are not read."""
    out: list[ContentFile] = []
    for m in snapshot_manifests(io, snapshot):
        spec_id = m.partition_spec_id if m.partition_spec_id is not None else 0
        spec = md.spec_by_id(spec_id)
        if written is not None and not _may_hold(md, m, spec, written):
            continue
        out.extend(e.file for e in live_entries(io, m, spec))
    return out


def _may_hold(
    md: TableMetadata, m: ManifestFile, spec: PartitionSpec, written: Sequence[ContentFile]
) -> bool:
    """Whether manifest ``m`` (of ``spec``) may list a file in the partition of one of ``written`` (all of
    the default spec), by its partition field summaries as Iceberg Java's ``ManifestEvaluator`` reads them
    (no lower bound: only nulls). Conservative: anything undecidable keeps the manifest."""
    if m.partition_spec_id is None:
        return True  # a v1 manifest named by path: its spec is known only once read
    if spec.spec_id != written[0].spec_id:
        return False  # files of other specs are never replaced
    summaries = m.partitions
    types = [f.type for f in spec.partition_type(md.schema_for_spec(spec)).fields]
    if summaries is None or len(summaries) != len(types):
        return True
    tuples = {tuple(f.partition) for f in written}
    return any(
        all(_within(s, t, v) for s, t, v in zip(summaries, types, values, strict=True)) for values in tuples
    )


def _within(summary: FieldSummary, t: it.IcebergType, value: Any) -> bool:
    if value is None:
        return summary.contains_null
    if isinstance(value, float) and value != value:
        return summary.contains_nan is not False
    if summary.lower_bound is None or summary.upper_bound is None:
        return False  # only nulls (and NaNs) in this field
    try:
        assert isinstance(t, it.PrimitiveType)
        lower, upper = serde.from_bytes(t, summary.lower_bound), serde.from_bytes(t, summary.upper_bound)
        return bool(lower <= value <= upper)
    except (TypeError, ValueError, AssertionError, GpuEngineError):
        return True


def _no_files_added_in(
    io: FileIO,
    base: TableMetadata,
    branch: str,
    planned: int | None,
    partitions: Collection[PartitionKey] | None,
    *,
    data: bool,
) -> None:
    """:class:`ValidationError` when a snapshot of ``branch`` after ``planned`` added a delete file, or
    (``data``) an append or overwrite added a data file, in one of ``partitions`` (None: anywhere)."""
    snap = parent_of(base, branch)
    while snap is not None and snap.snapshot_id != planned:
        for m in snapshot_manifests(io, snap):
            content = m.content or 0
            if m.added_snapshot_id != snap.snapshot_id or (content == 0 and not data):
                continue
            if content == 0 and snap.operation not in ("append", "overwrite"):
                continue  # a compaction's files hold rows that were there (removing them fails instead)
            spec_id = m.partition_spec_id if m.partition_spec_id is not None else 0
            for e in live_entries(io, m, base.spec_by_id(spec_id)):
                key = partition_key(e.file.spec_id, e.file.partition)
                if e.status == ADDED and (partitions is None or key in partitions):
                    kind = "data file" if content == 0 else "delete file"
                    raise ValidationError(
                        f"table {base.location}: snapshot {snap.snapshot_id} added {kind} {e.file.path} in "
                        f"a partition this overwrite replaces (spec {e.file.spec_id}, {e.file.partition}) "
                        f"after it was planned on snapshot {planned}"
                        + (
                            f" (isolation level {SERIALIZABLE}; snapshot would keep it)"
                            if content == 0
                            else ""
                        )
                    )
        parent = snap.parent_snapshot_id
        snap = None if parent is None else base.snapshots_by_id.get(parent)
