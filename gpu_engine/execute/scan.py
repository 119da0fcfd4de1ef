"""Scan execution: a planned scan's tasks run on worker threads, streamed as RecordBatches in task order.

The backend is chosen once per scan (:func:`gpu_engine.backend.select.choose`) and recorded with its
reason in :class:`ScanRun`; every task computes its delete masks there. Delete files are loaded once
per scan and released after the last task that uses them. A scan with fewer tasks than workers runs
each task's row groups as tasks of their own, so that one large file is decoded on every worker (each
may then run a row group's batches ahead of the consumer: memory stays proportional to the row groups
being read); the batches keep their order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import pyarrow as pa

from ..backend.select import BackendChoice, choose
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import NameMapping, mapping_for_schemas, name_mapping_of
from ..io.fileio import FileIO
from ..planning.splits import row_group_ranges
from ..tasks import ScanPlan, ScanTask
from .delete_cache import DeleteCache
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
    # (data file, reason) of each file a frame scan (to_cudf) decoded on the host
    host_decoded: list[tuple[str, str]] = field(default_factory=list, compare=False)


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
    delete_cache: DeleteCache | None = None,
) -> tuple[ScanRun, Iterator[pa.RecordBatch]]:
    """The scan's run record and its stream of output batches (at most ``limit`` rows). ``delete_cache``:
    delete files kept for the other executions of the same job (:mod:`.delete_cache`).

    ``plan``'s tasks must carry the deletes of one snapshot as planned (see :mod:`.deletes`): every delete
    file the spec's rules attach, less only equality deletes whose metrics rule the data file out."""
    run, sourced = execute_sourced(
        md, io, plan, projection, backend=backend, case_sensitive=case_sensitive, workers=workers,
        limit=limit, progress=progress, delete_cache=delete_cache,
    )  # fmt: skip
    return run, _batches(sourced)


def execute_sourced(
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
    delete_cache: DeleteCache | None = None,
) -> tuple[ScanRun, Iterator[tuple[ScanTask, pa.RecordBatch]]]:
    """:func:`execute`'s batches, each with the planned task it was read from."""
    choice = choose(backend)
    run = ScanRun(plan, projection, choice)
    workers = workers or default_workers()
    pieces = _pieces(plan.tasks, workers)
    tasks = tuple(p.task for p in pieces)
    loader = DeleteLoader(md, io, plan.schema, tasks, choice.name, read_name_mapping(md), delete_cache)
    ctx = TaskContext(md, io, projection, loader, choice.name, read_name_mapping(md), case_sensitive)
    return run, _stream(pieces, ctx, workers, limit, progress)


def _batches(sourced: Iterator[tuple[ScanTask, pa.RecordBatch]]) -> Iterator[pa.RecordBatch]:
    try:
        for _, batch in sourced:
            yield batch
    finally:
        close = getattr(sourced, "close", None)
        if close is not None:
            close()  # the workers reading ahead stop


_MAX_PIECE_DEPTH = 64  # batches: with 2**17-row batches, row groups of up to 8M rows


@dataclass(frozen=True)
class _Piece:
    """What one worker runs: a planned task or a part of it; ``last``: the part that ends the task."""

    task: ScanTask
    last: bool = True
    planned: ScanTask | None = None  # the planned task it is part of (None: the task itself)


def _pieces(tasks: tuple[ScanTask, ...], workers: int) -> tuple[_Piece, ...]:
    """The planned tasks, or with fewer tasks than ``workers`` each task's row groups (in order)."""
    if len(tasks) >= workers:
        return tuple(_Piece(t) for t in tasks)
    out: list[_Piece] = []
    for task in tasks:
        ranges = row_group_ranges(task.file, task.start, task.length)
        for i, (start, length) in enumerate(ranges):
            rows = max(1, task.estimated_rows * length // max(task.length, 1))
            part = replace(task, start=start, length=length, estimated_rows=rows) if len(ranges) > 1 else task
            out.append(_Piece(part, last=i == len(ranges) - 1, planned=task))
    return tuple(out)


def read_name_mapping(md: TableMetadata) -> NameMapping:
    """The table's name mapping for files without field ids; without one, the current schema's names
    (as DuckDB and Impala resolve Hive-written files; Iceberg Java falls back to column positions), and
    as aliases the names its fields had in older schemas (:func:`mapping_for_schemas`: a rename does not
    turn an old file's column into nulls)."""
    return name_mapping_of(md) or mapping_for_schemas(md.schema, md.schemas)


def _stream(
    pieces: tuple[_Piece, ...],
    ctx: TaskContext,
    workers: int,
    limit: int | None,
    progress: ScanProgress | None,
) -> Iterator[tuple[ScanTask, pa.RecordBatch]]:
    remaining = limit
    if remaining is not None and remaining <= 0:
        return

    def finished(piece: _Piece) -> None:
        ctx.deletes.release(piece.task)

    def run(piece: _Piece) -> Iterator[tuple[_Piece, pa.RecordBatch | None]]:
        for batch in execute_task(piece.task, ctx):
            yield piece, batch
        yield piece, None  # the piece is done

    depth = 2  # batches a task runs ahead of the consumer
    if any(not p.last for p in pieces):  # row groups of one task: each may run a row group ahead
        rows = max(p.task.estimated_rows for p in pieces)
        depth = max(depth, min(_MAX_PIECE_DEPTH, -(-rows // ctx.batch_size)))
    for piece, batch in ordered(pieces, run, workers=workers, depth=depth, done=finished):
        if batch is None:
            if progress is not None:
                progress.tasks_done += piece.last  # planned tasks
                progress.bytes += piece.task.length
                progress.files.add(piece.task.file.path)
            continue
        if remaining is not None:
            if batch.num_rows >= remaining:
                if progress is not None:  # the limit cuts this piece: count what was read of it
                    progress.rows += remaining
                    progress.bytes += piece.task.length
                    progress.files.add(piece.task.file.path)
                if remaining:
                    yield piece.planned or piece.task, batch.slice(0, remaining)
                return
            remaining -= batch.num_rows
        if progress is not None:
            progress.rows += batch.num_rows
        if batch.num_rows:
            yield piece.planned or piece.task, batch
