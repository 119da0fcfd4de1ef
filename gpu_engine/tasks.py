"""Values handed from planning to execution: frozen, picklable, with readable reprs.

A :class:`ScanTask` is one read unit (a data file or a byte range of it) with every delete file that
applies to it and the residual filter; a :class:`ScanPlan` is the tasks plus a :class:`PlanSummary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .expressions import Expression
from .iceberg.content_file import ContentFile
from .iceberg.schema import Schema
from .iceberg.sorting import SortField, SortOrder

POSITION_DELETES = 1
EQUALITY_DELETES = 2


@dataclass(frozen=True)
class DataFile:
    path: str
    file_format: str
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    data_sequence_number: int | None
    first_row_id: int | None = None
    split_offsets: tuple[int, ...] | None = None
    sort_order_id: int | None = None

    def __repr__(self) -> str:
        return f"DataFile({self.path!r}, rows={self.record_count}, seq={self.data_sequence_number})"


@dataclass(frozen=True)
class DeleteFile:
    """A position delete file, a deletion vector (``file_format == "PUFFIN"``) or an equality delete file."""

    path: str
    file_format: str
    content: int  # 1 position deletes / DV, 2 equality deletes
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    data_sequence_number: int
    equality_ids: tuple[int, ...] = ()
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None

    @property
    def is_deletion_vector(self) -> bool:
        return self.content == POSITION_DELETES and self.file_format == "PUFFIN"

    @property
    def kind(self) -> str:
        if self.is_deletion_vector:
            return "dv"
        return "position" if self.content == POSITION_DELETES else "equality"

    def __repr__(self) -> str:
        return f"DeleteFile({self.kind}, {self.path!r}, seq={self.data_sequence_number})"


@dataclass(frozen=True)
class ScanTask:
    """Read ``file`` from byte ``start`` for ``length`` bytes (whole row groups), apply ``deletes``, then
    filter rows with ``residual``."""

    file: DataFile
    start: int
    length: int
    deletes: tuple[DeleteFile, ...]
    residual: Expression
    estimated_rows: int

    @property
    def byte_range(self) -> tuple[int, int | None]:
        """``(start, length)`` of the row groups to read; a range reaching the file's recorded end reads to
        its real end (``None``): a recorded size smaller than the file dropped the row groups past it
        without an error (the file's row count, checked against the footer, says nothing of a range)."""
        if self.start + self.length >= self.file.file_size_in_bytes:
            return self.start, None
        return self.start, self.length

    def __repr__(self) -> str:
        return (
            f"ScanTask({self.file.path!r}, bytes {self.start}+{self.length}, deletes={len(self.deletes)}, "
            f"rows~{self.estimated_rows}, residual={self.residual})"
        )


@dataclass(frozen=True)
class PlanSummary:
    snapshot_id: int | None
    manifests_total: int = 0
    manifests_pruned: int = 0
    delete_manifests_total: int = 0
    delete_manifests_pruned: int = 0
    data_files_total: int = 0
    data_files_pruned_by_manifest: int = 0  # live files in manifests pruned by partition summaries
    data_files_pruned_by_partition: int = 0
    data_files_pruned_by_metrics: int = 0
    delete_files_total: int = 0
    delete_files_applied: int = 0
    # (data file, delete file) pairs the spec's rules attach that column metrics ruled out: equality
    # deletes whose keys cannot occur in the file, position deletes whose file_path range excludes it
    delete_attachments_skipped: int = 0
    bytes_total: int = 0
    bytes_kept: int = 0
    tasks: int = 0

    @property
    def data_files_kept(self) -> int:
        pruned = self.data_files_pruned_by_manifest + self.data_files_pruned_by_partition
        return self.data_files_total - pruned - self.data_files_pruned_by_metrics


@dataclass(frozen=True)
class ScanPlan:
    schema: Schema
    filter: Expression
    tasks: tuple[ScanTask, ...]
    summary: PlanSummary


@dataclass(frozen=True)
class FileGroup:
    """One rewrite unit of a compaction: data files of one partition, read in ``tasks`` (their deletes
    attached, no residual: every live row of the files is rewritten) and written as about
    ``expected_output_files`` files of ``output_spec_id``.

    ``partition`` is the files' partition in ``spec_id``; files of another spec than the output spec are
    grouped together (``spec_id`` None, ``partition`` empty), their rows repartitioned when written.
    """

    index: int
    spec_id: int | None
    partition: tuple[Any, ...]
    files: tuple[DataFile, ...]
    tasks: tuple[ScanTask, ...]
    output_spec_id: int
    expected_output_files: int
    max_output_file_size: int
    split_size: int  # input bytes per output file (planning.binpack.input_split_size)

    @property
    def input_bytes(self) -> int:
        return sum(f.file_size_in_bytes for f in self.files)

    @property
    def input_rows(self) -> int:
        """Rows stored in the files, deleted ones included."""
        return sum(f.record_count for f in self.files)

    @cached_property
    def delete_files(self) -> tuple[DeleteFile, ...]:
        """Every delete file that applies to a file of the group, once, in first-seen order (computed
        once: a Flink table's files carry thousands of equality deletes each)."""
        by_object = {id(d): d for t in self.tasks for d in t.deletes}  # shared DeleteFile objects
        seen: dict[tuple[str, int | None], DeleteFile] = {}
        for d in by_object.values():
            seen.setdefault((d.path, d.content_offset), d)
        return tuple(seen.values())

    def __repr__(self) -> str:
        where = "other specs" if self.spec_id is None else f"spec {self.spec_id} {self.partition}"
        return (
            f"FileGroup(#{self.index}, {where}, files={len(self.files)}, bytes={self.input_bytes}, "
            f"deletes={len(self.delete_files)}, outputs~{self.expected_output_files})"
        )


STRATEGIES = ("binpack", "sort", "zorder")


@dataclass(frozen=True)
class RewriteStrategy:
    """How a compaction orders the rows it rewrites: ``binpack`` (as read), ``sort`` by ``sort_order``,
    or ``zorder`` over ``zorder_columns``; ``cluster``: fields ordered by before those (ascending), the
    output partitions of a group repartitioned (:mod:`gpu_engine.execute.clustering`, added when a group
    is rewritten: a plan's strategies have none)."""

    kind: str = "binpack"
    sort_order: SortOrder | None = None
    zorder_columns: tuple[str, ...] = ()
    cluster: tuple[SortField, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {self.kind!r}")
        if (self.kind == "sort") != (self.sort_order is not None and not self.sort_order.is_unsorted):
            raise ValueError("a sort strategy needs a sort order with fields; other strategies take none")
        if (self.kind == "zorder") != bool(self.zorder_columns):
            raise ValueError("a zorder strategy needs columns; other strategies take none")

    @property
    def orders_rows(self) -> bool:
        """Whether rows are reordered (``sort``, ``zorder``, or a clustered ``binpack``)."""
        return self.kind != "binpack" or bool(self.cluster)

    def __str__(self) -> str:
        if self.kind == "zorder":
            return f"zorder({', '.join(self.zorder_columns)})"
        return self.kind


@dataclass(frozen=True)
class RewriteResult:
    """What rewriting one :class:`FileGroup` wrote (files not committed yet) and how long each step took."""

    group_index: int
    added: tuple[ContentFile, ...]
    rows_read: int
    rows_written: int
    read_seconds: float = 0.0
    order_seconds: float = 0.0
    write_seconds: float = 0.0
    backend: str = "cpu"
    parquet_io: str = "pyarrow"  # who decoded and encoded the Parquet files: pyarrow, or a frame library
    parquet_io_reason: str | None = None  # why pyarrow did, where a frame library was asked for

    @property
    def bytes_written(self) -> int:
        return sum(f.file_size_in_bytes for f in self.added)

    @property
    def seconds(self) -> float:
        return self.read_seconds + self.order_seconds + self.write_seconds
