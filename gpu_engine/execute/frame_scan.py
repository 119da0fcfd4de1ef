"""A scan executed into one data frame of a frame library (cuDF: ``TableScan.to_cudf``).

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


def execute_frame(
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
) -> tuple[ScanRun, Any]:
    """The scan's run record and its rows (at most ``limit``) as one frame of ``frames``; ``workers``
    threads prepare the tasks ahead of the decoder (default :func:`.scan.default_workers`)."""
    why = frames.unsupported(projection.arrow_schema)
    if why is not None:
        raise UnsupportedFeature(f"{frames.name}: {why}")
    choice = choose(backend)
    run = ScanRun(plan, projection, choice)
    mapping = read_name_mapping(md)
    loader = DeleteLoader(md, io, plan.schema, plan.tasks, choice.name, mapping)
    ctx = TaskContext(md, io, projection, loader, choice.name, mapping, case_sensitive)
    out: list[Any] = []
    pending: list[FramePart] = []
    remaining = limit

    def add(frame: Any, rows: int) -> None:
        nonlocal remaining
        if remaining is not None:
            if rows > remaining:
                frame = frames.head(frame, remaining)
            remaining -= min(rows, remaining)
        out.append(frame)

    def flush() -> None:
        if pending:
            add(*decode(pending, ctx, frames))
            for part in pending:
                ctx.deletes.release(part.task)
            pending.clear()

    def prepared(task: ScanTask) -> Iterator[tuple[ScanTask, FramePart | str]]:
        yield task, prepare(task, ctx)

    ahead = ordered(plan.tasks, prepared, workers=workers or default_workers(), depth=1)
    for task, got in ahead:
        if remaining is not None and pending and sum(len(p.pos) for p in pending) >= remaining:
            flush()  # the held tasks' rows may reach the limit: decode them before reading more
        if remaining is not None and remaining <= 0:
            break
        if isinstance(got, str):
            flush()
            if remaining is not None and remaining <= 0:
                break
            if not host_decode:
                raise UnsupportedFeature(
                    f"{got}; {frames.name} cannot decode it as the host reader does "
                    "(host_decode=True decodes such files on the host and copies them over)"
                )
            run.host_decoded.append((task.file.path, got))
            batches = list(execute_task(task, ctx))
            table = pa.Table.from_batches(batches, schema=projection.arrow_schema)
            add(frames.from_arrow_table(table), table.num_rows)
            ctx.deletes.release(task)
            continue
        if pending and (got.key != pending[0].key or _full(pending, got)):
            flush()
            if remaining is not None and remaining <= 0:
                break
        pending.append(got)
    flush()
    return run, frames.concat(out, projection.arrow_schema)
