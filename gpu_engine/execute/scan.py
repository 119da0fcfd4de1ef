"""Scan execution: a planned scan's tasks run on worker threads, streamed as RecordBatches in task order.

The backend is chosen once per scan (:func:`gpu_engine.backend.select.choose`) and recorded with its
reason in :class:`ScanRun`; every task computes its delete masks there. Delete files are loaded once
per scan and released after the last task that uses them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from ..backend.select import BackendChoice, choose
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import NameMapping, mapping_for_schema, name_mapping_of
from ..io.fileio import FileIO
from ..tasks import ScanPlan, ScanTask
from .deletes import DeleteLoader
from .projection import Projection
from .stream import ordered
from .task import TaskContext, execute_task


@dataclass
class ScanProgress:
    """Counters a progress display reads while the scan streams (updated in the consumer's thread)."""

    tasks_done: int = 0
    rows: int = 0
    bytes: int = 0
    files: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class ScanRun:
    plan: ScanPlan
    projection: Projection
    backend: BackendChoice


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def execute(
    md: TableMetadata,
    io: FileIO,
    plan: ScanPlan,
    projection: Projection,
    *,
    backend: str = "auto",
    case_sensitive: bool = True,
    workers: int | None = None,
    limit: int | None = None,
    progress: ScanProgress | None = None,
) -> tuple[ScanRun, Iterator[pa.RecordBatch]]:
    """The scan's run record and its stream of output batches (at most ``limit`` rows)."""
    choice = choose(backend)
    run = ScanRun(plan, projection, choice)
    loader = DeleteLoader(md, io, plan.schema, plan.tasks, choice.name, _mapping(md))
    ctx = TaskContext(md, io, projection, loader, choice.name, _mapping(md), case_sensitive)
    return run, _stream(plan.tasks, ctx, workers or default_workers(), limit, progress)


def _mapping(md: TableMetadata) -> NameMapping:
    """The table's name mapping for files without field ids; without one, the current schema's names
    (as DuckDB and Impala resolve Hive-written files; Iceberg Java falls back to column positions)."""
    return name_mapping_of(md) or mapping_for_schema(md.schema)


def _stream(
    tasks: tuple[ScanTask, ...],
    ctx: TaskContext,
    workers: int,
    limit: int | None,
    progress: ScanProgress | None,
) -> Iterator[pa.RecordBatch]:
    remaining = limit
    if remaining is not None and remaining <= 0:
        return

    def finished(task: ScanTask) -> None:
        ctx.deletes.release(task)

    def run(task: ScanTask) -> Iterator[pa.RecordBatch]:
        yield from execute_task(task, ctx)
        if progress is not None:
            progress.tasks_done += 1
            progress.bytes += task.length
            progress.files.add(task.file.path)

    for batch in ordered(tasks, run, workers=workers, done=finished):
        if remaining is not None:
            if batch.num_rows >= remaining:
                if remaining:
                    yield batch.slice(0, remaining)
                return
            remaining -= batch.num_rows
        if progress is not None:
            progress.rows += batch.num_rows
        if batch.num_rows:
            yield batch
