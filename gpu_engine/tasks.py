"""Values handed from planning to execution: frozen, picklable, with readable reprs.

A :class:`ScanTask` is one read unit (a data file or a byte range of it) with every delete file that
applies to it and the residual filter; a :class:`ScanPlan` is the tasks plus a :class:`PlanSummary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .expressions import Expression
from .iceberg.schema import Schema

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
