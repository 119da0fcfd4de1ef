"""One scan task decoded by a frame library (cuDF on the device): the steps of :mod:`.task`, with the
data columns decoded by the frame library and kept there.

The file's footer, row-group pruning and column resolution by field id stay on the host (they are
metadata); the selected row groups' columns are decoded by the frame library and cast to the host
reader's types. Delete positions become a keep-mask on the scan's backend; the residual filter and
equality deletes read host copies of only the columns they name. Files the frame decoder cannot read as
the host reader does (:func:`~gpu_engine.io.device_decode.frame_unsupported`) are returned as the reason,
for the caller to decode on the host or refuse.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import DataFileError
from ..expressions import AlwaysTrue
from ..expressions.evaluator import evaluate
from ..iceberg import metadata_columns as mc
from ..iceberg.schema import Schema
from ..io.device_decode import frame_unsupported
from ..io.parquet_projection import ColumnRead, identity_constants
from ..io.parquet_read import ParquetSource
from ..tasks import ScanTask
from . import masks
from .deletes import TaskDeletes
from .frames import Frames
from .metadata import metadata_column
from .projection import residual_names
from .task import TaskContext, checked_rows, open_source, spec_field_ids, task_read_schema


def frame_task(task: ScanTask, ctx: TaskContext, frames: Frames) -> Any:
    """The task's live rows matching its residual, as one frame of the scan's output columns; a
    ``str`` naming why ``frames`` cannot decode the file as the host reader does."""
    with open_source(task, ctx) as source:
        return _frame(task, ctx, frames, source)


def _frame(task: ScanTask, ctx: TaskContext, frames: Frames, source: ParquetSource) -> Any:
    deletes = ctx.deletes.for_task(task, checked_rows(task, source))
    schema = task_read_schema(ctx, task, ctx.deletes.equality_ids(task))
    spec = ctx.md.specs[task.file.spec_id]
    constants = identity_constants(spec, task.file.partition)
    proj = source.projection(schema, name_mapping=ctx.name_mapping, constants=constants)
    reason = frame_unsupported(proj)
    if reason is not None:
        return reason
    in_split = source.row_groups_in(task.start, task.length)
    groups = source.selected_row_groups(
        proj, schema, in_split, task.residual, case_sensitive=ctx.case_sensitive
    )
    starts = source.row_group_starts()
    ranges = [np.arange(starts[g], starts[g + 1], dtype=np.int64) for g in groups]
    pos = np.concatenate(ranges) if ranges else np.empty(0, dtype=np.int64)
    n = len(pos)
    types = {f.name: f.type for f in proj.schema}
    read: dict[str, Any] = {}
    if groups:
        raw = frames.read(ctx.io, source.path, proj.columns, groups)
        if frames.num_rows(raw) != n:
            raise DataFileError(
                f"{source.path}: row groups {groups} decode to {frames.num_rows(raw)} rows; "
                f"the footer says {n}"
            )
        for r in proj.reads:
            if r.column is not None:
                read[r.field.name] = _column(frames, raw, r, types[r.field.name])
    made = {r.field.name: r for r in proj.reads if r.column is None}
    keep = _keep(task, ctx, frames, deletes, schema, proj.schema, read, made, pos, starts, groups)
    if keep is not None and not keep.all():
        read = {name: frames.filter(col, keep) for name, col in read.items()}
        pos = pos[keep]
    return _output(task, ctx, frames, read, made, types, pos)


def _column(frames: Frames, raw: Any, r: ColumnRead, target: pa.DataType) -> Any:
    assert r.column is not None
    col = frames.cast(frames.column(raw, r.column), target)
    if r.required and frames.null_count(col):
        raise DataFileError(f"{r.where}: holds nulls for a required field")
    return col


def _keep(
    task: ScanTask,
    ctx: TaskContext,
    frames: Frames,
    deletes: TaskDeletes,
    schema: Schema,
    arrow_schema: pa.Schema,
    read: dict[str, Any],
    made: dict[str, ColumnRead],
    pos: np.ndarray,
    starts: list[int],
    groups: list[int],
) -> np.ndarray | None:
    """Rows of the decoded row groups that no delete removes and that match the residual (None: all)."""
    n = len(pos)
    keep: np.ndarray | None = None
    if not deletes.empty and n:
        parts = []
        for g in groups:
            rows = starts[g + 1] - starts[g]
            part = masks.position_keep(deletes.positions, starts[g], rows, ctx.backend)
            parts.append(np.ones(rows, dtype=bool) if part is None else part)
        keep = np.concatenate(parts)
    filtering = not isinstance(task.residual, AlwaysTrue)
    if not (filtering or deletes.equality) or not n:
        return keep
    names = residual_names(schema, task.residual) if filtering else {}
    wanted = {p[0] for p in names.values()}
    for eq in deletes.equality:
        wanted |= {schema.paths_by_id[i][0] for i in eq.ids}
    batch = _host_batch(frames, read, made, arrow_schema, wanted, n)
    if filtering:
        matches = evaluate(task.residual, batch, names).to_numpy(zero_copy_only=False)
        keep = matches if keep is None else keep & matches
    seq = task.file.data_sequence_number or 0
    for eq in deletes.equality:
        alive = ~eq.deleted(batch, schema, ctx.backend, seq)
        keep = alive if keep is None else keep & alive
    return keep


def _host_batch(
    frames: Frames,
    read: dict[str, Any],
    made: dict[str, ColumnRead],
    arrow_schema: pa.Schema,
    names: set[str],
    n: int,
) -> pa.RecordBatch:
    """Host copies of the read schema's (``arrow_schema``) top-level columns ``names``: those a mask
    reads."""
    fields = [f for f in arrow_schema if f.name in names]
    arrays = [
        frames.to_arrow(read[f.name], f.type) if f.name in read else _made(made[f.name], n) for f in fields
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _made(r: ColumnRead, n: int) -> pa.Array:
    """The ``n`` rows of a column the file lacks (constant, initial-default or null)."""
    assert r.make is not None
    return r.make(n)


def _output(
    task: ScanTask,
    ctx: TaskContext,
    frames: Frames,
    read: dict[str, Any],
    made: dict[str, ColumnRead],
    types: dict[str, pa.DataType],
    pos: np.ndarray,
) -> Any:
    m = len(pos)
    projection = ctx.projection

    def data(name: str) -> Any:
        return read[name] if name in read else frames.from_arrow(_made(made[name], m))

    columns: dict[str, Any] = {f.name: data(f.name) for f in projection.data.fields}
    pids = spec_field_ids(ctx.md, task)
    for f in projection.metadata:
        stored = None
        if f in mc.LINEAGE and (f.name in read or f.name in made):
            stored = (
                frames.to_arrow(read[f.name], types[f.name]) if f.name in read else _made(made[f.name], m)
            )
        columns[f.name] = frames.from_arrow(
            metadata_column(f, task.file, pos, partition_ids=pids, stored=stored)
        )
    ordered = [(name, columns[name]) for name in projection.names]
    return frames.assemble(ordered, projection.arrow_schema, m)
