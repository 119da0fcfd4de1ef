"""A scan executed into data frames of a frame library (cuDF: ``TableScan.to_cudf``, compaction).

Tasks are prepared on worker threads, in task order and a few ahead of the decoder (footer, column
resolution, row-group pruning, delete positions); consecutive tasks whose files resolve to the same
stored columns are decoded together, up to :data:`BATCH_FILES` files and :data:`BATCH_BYTES` bytes per
decoder call (cuDF decodes them in one call, in parallel on the device). A file the frame decoder cannot
read as the host reader does is decoded by the host reader and copied over, its path and the reason
recorded in :attr:`ScanRun.host_decoded`, or, with ``host_decode=False``, refused: never decoded
differently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..backend.select import choose
from ..errors import UnsupportedFeature
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..tasks import ScanPlan, ScanTask
from .delete_cache import DeleteCache
from .deletes import DeleteLoader
from .frame_task import FramePart, decode, prepare
from .frames import Frames
from .projection import Projection
from .scan import ScanRun, default_workers, read_name_mapping
from .stream import ordered
from .task import TaskContext, execute_task

# a decoder call reads at most this many files and bytes (their ranges of the data files)
BATCH_FILES = 256
BATCH_BYTES = 1 << 30


_MAX_ROWS = 2**31 - 1  # cuDF's column size limit: a decoder call reads fewer rows


def _full(pending: list[FramePart], more: FramePart) -> bool:
    files = len(pending) + 1
    rows = sum(len(p.pos) for p in pending) + len(more.pos)
    size = sum(p.task.length for p in pending) + more.task.length
    return files > BATCH_FILES or size > BATCH_BYTES or rows >= _MAX_ROWS


def frame_stream(
    md: TableMetadata,
    io: FileIO,
    plan: ScanPlan,
    projection: Projection,
    frames: Frames,
    *,
    backend: str = "auto",
    case_sensitive: bool = True,
    limit: int | None = None,
    host_decode: bool = True,
    workers: int | None = None,
    delete_cache: DeleteCache | None = None,
) -> tuple[ScanRun, Iterator[tuple[Any, int]]]:
    """The scan's run record and its rows (at most ``limit``) as a stream of frames of ``frames`` with
    their row counts, one per decoder call (or host-decoded file), in task order (see the module doc);
    ``workers`` threads prepare the tasks ahead of the decoder (default :func:`.scan.default_workers`).
    ``delete_cache``: delete files kept for the other executions of the same job (:mod:`.delete_cache`).
    Columns the library cannot hold are refused here, before the stream starts."""
    why = frames.unsupported(projection.arrow_schema)
    if why is not None:
        raise UnsupportedFeature(f"{frames.name}: {why}")
    choice = choose(backend)
    run = ScanRun(plan, projection, choice)
    mapping = read_name_mapping(md)
    loader = DeleteLoader(md, io, plan.schema, plan.tasks, choice.name, mapping, delete_cache)
    ctx = TaskContext(md, io, projection, loader, choice.name, mapping, case_sensitive)
    return run, _frames(run, ctx, plan, frames, limit, host_decode, workers)


def _frames(
    run: ScanRun,
    ctx: TaskContext,
    plan: ScanPlan,
    frames: Frames,
    limit: int | None,
    host_decode: bool,
    workers: int | None,
) -> Iterator[tuple[Any, int]]:
    pending: list[FramePart] = []
    remaining = limit

    def out(frame: Any, rows: int) -> tuple[Any, int]:
        nonlocal remaining
        if remaining is not None:
            if rows > remaining:
                frame, rows = frames.head(frame, remaining), remaining
            remaining -= rows
        return frame, rows

    def flush() -> Iterator[tuple[Any, int]]:
        if pending:
            decoded = out(*decode(pending, ctx, frames))
            for part in pending:
                ctx.deletes.release(part.task)
            pending.clear()
            yield decoded

    def prepared(task: ScanTask) -> Iterator[tuple[ScanTask, FramePart | str]]:
        yield task, prepare(task, ctx)

    ahead = ordered(plan.tasks, prepared, workers=workers or default_workers(), depth=1)
    for task, got in ahead:
        if remaining is not None and pending and sum(len(p.pos) for p in pending) >= remaining:
            yield from flush()  # the held tasks' rows may reach the limit: decode them before reading more
        if remaining is not None and remaining <= 0:
            break
        if isinstance(got, str):
            yield from flush()
            if remaining is not None and remaining <= 0:
                break
            if not host_decode:
                raise UnsupportedFeature(
                    f"{got}; {frames.name} cannot decode it as the host reader does "
                    "(host_decode=True decodes such files on the host and copies them over)"
                )
            run.host_decoded.append((task.file.path, got))
            batches = list(execute_task(task, ctx))
            table = pa.Table.from_batches(batches, schema=run.projection.arrow_schema)
            yield out(frames.from_arrow_table(table), table.num_rows)
            ctx.deletes.release(task)
            continue
        if pending and (got.key != pending[0].key or _full(pending, got)):
            yield from flush()
            if remaining is not None and remaining <= 0:
                break
        pending.append(got)
    yield from flush()
