"""One scan task, executed: read its row groups by field id, drop deleted rows, filter by the residual,
add metadata columns and return exactly the scan's output columns.

A pure function of the task and a :class:`TaskContext` (the scan-wide values: metadata, IO, output
projection, delete loader, backend); it streams one RecordBatch per row-group batch, so memory follows
the largest row group, not the file. :func:`compare_task` reads a file once with two snapshots' deletes
(for changelogs, :mod:`.compare`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ..errors import DataFileError, UnsupportedFeature
from ..expressions import AlwaysTrue
from ..expressions.evaluator import evaluate
from ..iceberg import metadata_columns as mc
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import NameMapping
from ..iceberg.schema import Schema
from ..io.arrow_nested import struct_array
from ..io.fileio import FileIO
from ..io.parquet_projection import identity_constants
from ..io.parquet_read import FileBatch, ParquetSource
from ..tasks import ScanTask
from . import masks
from .deletes import DeleteLoader, TaskDeletes
from .metadata import metadata_column
from .projection import Projection, read_schema, residual_ids, residual_names


@dataclass(frozen=True)
class TaskContext:
    md: TableMetadata
    io: FileIO
    projection: Projection
    deletes: DeleteLoader
    backend: str  # "cpu" or "cuda": where the delete masks are computed
    name_mapping: NameMapping | None
    case_sensitive: bool = True
    batch_size: int = 1 << 17
    # read schemas by (residual ids, equality ids): a Flink table's tasks carry thousands of deletes each
    schemas: dict[tuple[frozenset[int], frozenset[int]], Schema] = field(default_factory=dict, compare=False)


def execute_task(task: ScanTask, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
    """The task's live rows matching its residual, as batches of the scan's output schema."""
    with open_source(task, ctx) as source:
        yield from _execute(task, ctx, source)


def open_source(task: ScanTask, ctx: TaskContext) -> ParquetSource:
    if task.file.file_format.upper() != "PARQUET":
        raise UnsupportedFeature(f"{task.file.path}: {task.file.file_format} data files are not supported")
    return ParquetSource.open(ctx.io, task.file.path)


def _execute(task: ScanTask, ctx: TaskContext, source: ParquetSource) -> Iterator[pa.RecordBatch]:
    deletes = ctx.deletes.for_task(task, checked_rows(task, source))
    schema = task_read_schema(ctx, task, ctx.deletes.equality_ids(task))
    partition_ids = spec_field_ids(ctx.md, task)
    for fb, matches in _batches(task, ctx, source, schema):
        keep = _keep(fb, schema, deletes, ctx.backend, task.file.data_sequence_number or 0)
        if matches is not None:
            keep = matches if keep is None else keep & matches
        yield _output(fb, keep, task, ctx.projection, partition_ids)


def compare_task(
    before: ScanTask, after: ScanTask, ctx: TaskContext, after_deletes: DeleteLoader
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """The rows of one file read once with two snapshots' deletes: ``before``'s (from ``ctx.deletes``)
    and ``after``'s (same file, rows and residual; from ``after_deletes``). Per batch, the rows matching
    the residual that are alive before but not after (as the scan's output), and the positions of those
    alive after but not before."""
    with open_source(before, ctx) as source:
        rows = checked_rows(before, source)
        old, new = ctx.deletes.for_task(before, rows), after_deletes.for_task(after, rows)
        schema = task_read_schema(
            ctx, before, ctx.deletes.equality_ids(before) | after_deletes.equality_ids(after)
        )
        partition_ids = spec_field_ids(ctx.md, before)
        seq = before.file.data_sequence_number or 0
        for fb, matches in _batches(before, ctx, source, schema):
            n = fb.batch.num_rows
            alive = [
                _all(n) if k is None else k
                for k in (_keep(fb, schema, d, ctx.backend, seq) for d in (old, new))
            ]
            if matches is not None:
                alive = [a & matches for a in alive]
            again = np.flatnonzero(alive[1] & ~alive[0]) + fb.first_pos
            yield _output(fb, alive[0] & ~alive[1], before, ctx.projection, partition_ids), again


def task_read_schema(ctx: TaskContext, task: ScanTask, eq_ids: frozenset[int]) -> Schema:
    """The task's read schema (:func:`.projection.read_schema`), computed once per scan for each
    combination of residual and equality columns."""
    key = (residual_ids(task.residual), eq_ids)
    found = ctx.schemas.get(key)
    if found is None:
        found = ctx.schemas[key] = read_schema(ctx.md, ctx.projection, *key, task.file.path)
    return found


def _all(n: int) -> np.ndarray:
    return np.ones(n, dtype=bool)


def checked_rows(task: ScanTask, source: ParquetSource) -> int:
    if source.num_rows != task.file.record_count:
        raise DataFileError(
            f"{task.file.path} has {source.num_rows} rows but its manifest entry says "
            f"{task.file.record_count}"
        )
    return source.num_rows


def spec_field_ids(md: TableMetadata, task: ScanTask) -> tuple[int, ...]:
    return tuple(f.field_id for f in md.specs[task.file.spec_id].fields)


def _batches(
    task: ScanTask, ctx: TaskContext, source: ParquetSource, schema: Schema
) -> Iterator[tuple[FileBatch, np.ndarray | None]]:
    """The task's row groups read with ``schema``, each batch with its rows matching the residual (None:
    no residual)."""
    names = residual_names(schema, task.residual)
    filtering = not isinstance(task.residual, AlwaysTrue)
    spec = ctx.md.specs[task.file.spec_id]
    batches = source.batches(
        schema,
        row_groups=source.row_groups_in(*task.byte_range),
        residual=task.residual,
        name_mapping=ctx.name_mapping,
        case_sensitive=ctx.case_sensitive,
        batch_size=ctx.batch_size,
        constants=identity_constants(spec, task.file.partition),  # identity partition columns not in the file
    )
    for fb in batches:
        if filtering:
            yield fb, evaluate(task.residual, fb.batch, names).to_numpy(zero_copy_only=False)
        else:
            yield fb, None


def _keep(
    fb: FileBatch, schema: Schema, deletes: TaskDeletes, backend: str, data_sequence_number: int
) -> np.ndarray | None:
    """Rows of the batch (of a data file with ``data_sequence_number``) that no delete removes (None: all
    of them)."""
    if deletes.empty:
        return None
    n = fb.batch.num_rows
    keep = masks.position_keep(deletes.positions, fb.first_pos, n, backend)
    for eq in deletes.equality:
        deleted = eq.deleted(fb.batch, schema, backend, data_sequence_number)
        keep = ~deleted if keep is None else keep & ~deleted
    return keep


def _output(
    fb: FileBatch,
    keep: np.ndarray | None,
    task: ScanTask,
    projection: Projection,
    partition_ids: tuple[int, ...],
) -> pa.RecordBatch:
    batch = fb.batch
    pos = np.arange(fb.first_pos, fb.first_pos + batch.num_rows, dtype=np.int64)
    if keep is not None and not keep.all():
        mask = pa.array(keep, pa.bool_())
        batch = batch.filter(mask)
        pos = pos[keep]
    columns: dict[str, pa.Array] = {}
    data_types = {f.name: f.type for f in projection.arrow_schema}
    for f in projection.data.fields:
        columns[f.name] = _conform(batch.column(f.name), data_types[f.name])
    for f in projection.metadata:
        stored = batch.column(f.name) if f in mc.LINEAGE and f.name in batch.schema.names else None
        columns[f.name] = metadata_column(f, task.file, pos, partition_ids=partition_ids, stored=stored)
    if not projection.names:  # columns=[]: rows without columns (from_arrays would lose the row count)
        return batch.select([]).replace_schema_metadata(projection.arrow_schema.metadata)
    return pa.RecordBatch.from_arrays([columns[n] for n in projection.names], schema=projection.arrow_schema)


def _conform(column: pa.Array, target: pa.DataType) -> pa.Array:
    """``column`` with struct children the output does not select removed (the read may hold more)."""
    if column.type == target:
        return column
    if pa.types.is_struct(target) and pa.types.is_struct(column.type):
        assert isinstance(column, pa.StructArray)
        children = [_conform(column.field(f.name), f.type) for f in target]
        return struct_array(children, list(target), len(column), column.is_null())
    raise DataFileError(f"internal: column of type {column.type} cannot be returned as {target}")
