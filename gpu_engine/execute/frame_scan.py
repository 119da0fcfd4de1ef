"""A scan executed into one data frame of a frame library (cuDF: ``TableScan.to_cudf``).

Tasks run one after another in the calling thread (the frame library decodes each file's row groups in
one call, in parallel on the device). A file the frame decoder cannot read as the host reader does is
decoded by the host reader and copied over, its path and the reason recorded in
:attr:`ScanRun.host_decoded`, or, with ``host_decode=False``, refused: never decoded differently.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..backend.select import choose
from ..errors import UnsupportedFeature
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..tasks import ScanPlan
from .deletes import DeleteLoader
from .frame_task import frame_task
from .frames import Frames
from .projection import Projection
from .scan import ScanRun, read_name_mapping
from .task import TaskContext, execute_task


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
) -> tuple[ScanRun, Any]:
    """The scan's run record and its rows (at most ``limit``) as one frame of ``frames``."""
    why = frames.unsupported(projection.arrow_schema)
    if why is not None:
        raise UnsupportedFeature(f"{frames.name}: {why}")
    choice = choose(backend)
    run = ScanRun(plan, projection, choice)
    mapping = read_name_mapping(md)
    loader = DeleteLoader(md, io, plan.schema, plan.tasks, choice.name, mapping)
    ctx = TaskContext(md, io, projection, loader, choice.name, mapping, case_sensitive)
    parts: list[Any] = []
    remaining = limit
    for task in plan.tasks:
        if remaining is not None and remaining <= 0:
            break
        got = frame_task(task, ctx, frames)
        if isinstance(got, str):
            if not host_decode:
                raise UnsupportedFeature(
                    f"{got}; {frames.name} cannot decode it as the host reader does "
                    "(host_decode=True decodes such files on the host and copies them over)"
                )
            run.host_decoded.append((task.file.path, got))
            batches = list(execute_task(task, ctx))
            got = frames.from_arrow_table(pa.Table.from_batches(batches, schema=projection.arrow_schema))
        ctx.deletes.release(task)
        rows = frames.num_rows(got)
        if remaining is not None:
            if rows > remaining:
                got = frames.head(got, remaining)
            remaining -= min(rows, remaining)
        parts.append(got)
    return run, frames.concat(parts, projection.arrow_schema)
