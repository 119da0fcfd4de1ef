"""Scan tasks decoded by a frame library (cuDF on the device), many files per decoder call: the steps
of :mod:`.task`, with the data columns decoded by the frame library and kept there.

:func:`prepare` does a task's metadata work on the host: the file's footer, column resolution by field
id, row-group pruning, its delete positions and the bytes its row groups' columns decode to
(:func:`.decoded_size.decoded_bytes`: what a decoder call holds). Tasks whose
files resolve to the same columns of the same stored types form a batch (:attr:`FramePart.key`), and
:func:`decode` reads the whole batch's row groups in one decoder call, casts each column to the host
reader's type once, clears the whole batch's deleted positions in one kernel call on the scan's
backend (a call per file costs a transfer and a launch each: 85 of them were a third of a 100-file scan's
host time on an H200) and filters once; row positions are made only for the metadata columns that show
them. The residual filter and equality deletes read host copies of only
the columns they name; constant, default and metadata columns are made on the host and copied over. A
file the frame decoder cannot read as the host reader does
(:func:`~gpu_engine.io.device_decode.frame_unsupported`) is returned by :func:`prepare` as the reason,
for the caller to decode on the host or refuse.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFileError
from ..expressions import AlwaysTrue
from ..expressions.evaluator import evaluate
from ..iceberg import metadata_columns as mc
from ..iceberg.schema import Schema
from ..iceberg.types import NestedField
from ..io.device_decode import frame_unsupported
from ..io.parquet_projection import ColumnRead, Projection, identity_constants
from ..tasks import ScanTask
from . import masks
from .decoded_size import decoded_bytes
from .deletes import TaskDeletes
from .frames import Frames
from .metadata import lineage_column, metadata_column
from .projection import residual_names
from .task import TaskContext, checked_rows, open_source, spec_field_ids, task_read_schema

_REPETITION = re.compile(r"\b(required|optional) ")


def _layout(schema: pq.ParquetSchema) -> str:
    """A Parquet schema's elements as text (types, names, field ids, groups), nullability left out."""
    lines = [line for line in str(schema).splitlines() if not line.startswith("<")]  # not the object's repr
    return _REPETITION.sub("", "\n".join(lines))


@dataclass(frozen=True)
class FramePart:
    """One task, prepared on the host for a frame decode."""

    task: ScanTask
    groups: tuple[int, ...]  # the row groups to decode, in file order
    ranges: tuple[tuple[int, int], ...]  # the file positions [first, end) of each of their rows
    rows: int  # their row count
    deletes: TaskDeletes
    schema: Schema  # the task's read schema
    proj: Projection
    partition_ids: tuple[int, ...]
    layout: str  # the file's whole Parquet schema, nullability aside
    decoded: int  # the bytes its row groups' columns read decode to (estimated from the footer)

    @property
    def key(self) -> Hashable:
        """Equal for tasks one decoder call can read together: the same Parquet schema (cuDF reads several
        files in one call only where every schema element agrees but for nullability: types, names, field
        ids, also of columns not read), the same read schema."""
        return (self.layout, self.schema)

    def positions(self) -> np.ndarray:
        """The file positions of the rows to decode (int64, ascending)."""
        ranges = [np.arange(first, end, dtype=np.int64) for first, end in self.ranges]
        return np.concatenate(ranges) if ranges else np.empty(0, dtype=np.int64)

    def deleted_rows(self) -> np.ndarray:
        """Indexes into the rows to decode of those a delete position removes (int64, ascending)."""
        positions = self.deletes.positions
        if not len(positions):
            return positions
        out, base = [], 0
        for first, end in self.ranges:
            out.append(masks.in_range(positions, first, end - first) - (first - base))
            base += end - first
        return np.concatenate(out) if out else np.empty(0, dtype=np.int64)

    @property
    def made(self) -> dict[str, ColumnRead]:
        """The read schema's columns the file lacks (constants, defaults, nulls), by name."""
        return {r.field.name: r for r in self.proj.reads if r.column is None}


def prepare(task: ScanTask, ctx: TaskContext) -> FramePart | str:
    """The task's host-side work, or why the frame decoder cannot read its file as the host reader does."""
    with open_source(task, ctx) as source:
        deletes = ctx.deletes.for_task(task, checked_rows(task, source))
        schema = task_read_schema(ctx, task, ctx.deletes.equality_ids(task))
        spec = ctx.md.specs[task.file.spec_id]
        constants = identity_constants(spec, task.file.partition)
        proj = source.projection(schema, name_mapping=ctx.name_mapping, constants=constants)
        reason = frame_unsupported(proj)
        if reason is not None:
            return reason
        in_split = source.row_groups_in(*task.byte_range)
        groups = source.selected_row_groups(
            proj, schema, in_split, task.residual, case_sensitive=ctx.case_sensitive
        )
        starts = source.row_group_starts()
        layout = _layout(source.file.schema)
        decoded = decoded_bytes(source.metadata, groups, proj.columns, source.arrow_schema)
    ranges = tuple((starts[g], starts[g + 1]) for g in groups)
    rows = sum(end - first for first, end in ranges)
    ids = spec_field_ids(ctx.md, task)
    return FramePart(task, tuple(groups), ranges, rows, deletes, schema, proj, ids, layout, decoded)


class FrameRows(NamedTuple):
    """Rows of a scan as one frame: their number (a frame library may count none when there are no
    columns) and the tasks they come from, with the rows of each, in order."""

    frame: Any
    rows: int
    sources: tuple[tuple[ScanTask, int], ...]


def decode(parts: Sequence[FramePart], ctx: TaskContext, frames: Frames) -> FrameRows:
    """The live rows of ``parts`` (one :attr:`FramePart.key`) matching their residuals, in task order,
    as one frame of the scan's output columns."""
    first = parts[0]
    types = {f.name: f.type for f in first.proj.schema}
    counts = [p.rows for p in parts]
    read: dict[str, Any] = {}
    sources = _sources(parts)
    if sources and first.proj.columns:  # no file columns (only constants or metadata): nothing to decode
        raw = frames.read(ctx.io, sources, first.proj.columns)
        decoded, expected = frames.num_rows(raw), sum(counts)
        if decoded != expected:
            paths = ", ".join(path for path, _ in sources)
            raise DataFileError(
                f"{paths}: the row groups decode to {decoded} rows; the footers say {expected}"
            )
        for r in first.proj.reads:
            if r.column is not None:
                read[r.field.name] = _column(frames, raw, r, types[r.field.name])
    else:  # every row group pruned (or no file columns): the read columns hold no rows
        for r in first.proj.reads:
            if r.column is not None:
                read[r.field.name] = frames.from_arrow(pa.array([], types[r.field.name]))
    keep = _keep(parts, counts, ctx, frames, read)
    per_part: list[np.ndarray | None] = [None] * len(parts)  # each part's keep-mask (None: every row)
    sizes = counts
    if keep is not None and not keep.all():
        mask = frames.mask(keep)
        read = {name: frames.filter(col, mask) for name, col in read.items()}
        split = np.split(keep, np.cumsum(counts)[:-1])
        per_part, sizes = list(split), [int(np.count_nonzero(k)) for k in split]
    origin = tuple((p.task, n) for p, n in zip(parts, sizes, strict=True))
    out = _output(parts, per_part, sizes, ctx, frames, read, types)
    return FrameRows(out, sum(sizes), origin)


def _sources(parts: Sequence[FramePart]) -> list[tuple[str, tuple[int, ...]]]:
    """Each part's file and row groups, consecutive parts of one file (a split file) as one source."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for p in parts:
        if not p.groups:
            continue
        if out and out[-1][0] == p.task.file.path:
            out[-1] = (out[-1][0], out[-1][1] + p.groups)
        else:
            out.append((p.task.file.path, p.groups))
    return out


def _column(frames: Frames, raw: Any, r: ColumnRead, target: pa.DataType) -> Any:
    assert r.column is not None
    col = frames.cast(frames.column(raw, r.column), target)
    if r.required and frames.null_count(col):
        raise DataFileError(f"{r.where}: holds nulls for a required field")
    return col


def _keep(
    parts: Sequence[FramePart], counts: list[int], ctx: TaskContext, frames: Frames, read: dict[str, Any]
) -> np.ndarray | None:
    """Rows of the decoded parts that no delete removes and that match their residual (None: all)."""
    per_part = _position_keep(parts, counts, ctx.backend)
    filtered = [not isinstance(p.task.residual, AlwaysTrue) for p in parts]
    if any(filtered) or any(p.deletes.equality for p in parts):
        wanted: set[str] = set()
        for p, f in zip(parts, filtered, strict=True):
            if f:
                wanted |= {path[0] for path in residual_names(p.schema, p.task.residual).values()}
            for eq in p.deletes.equality:
                wanted |= {p.schema.paths_by_id[i][0] for i in eq.ids}
        batch = _host_batch(parts, counts, frames, read, wanted)
        offset = 0
        for i, (p, n) in enumerate(zip(parts, counts, strict=True)):
            sub = batch.slice(offset, n)
            offset += n
            k = per_part[i]
            if filtered[i] and n:
                names = residual_names(p.schema, p.task.residual)
                matches = evaluate(p.task.residual, sub, names).to_numpy(zero_copy_only=False)
                k = matches if k is None else k & matches
            seq = p.task.file.data_sequence_number or 0
            for eq in p.deletes.equality:
                alive = ~eq.deleted(sub, p.schema, ctx.backend, seq)
                k = alive if k is None else k & alive
            per_part[i] = k
    if all(k is None for k in per_part):
        return None
    return np.concatenate(
        [np.ones(n, dtype=bool) if k is None else k for k, n in zip(per_part, counts, strict=True)]
    )


def _position_keep(parts: Sequence[FramePart], counts: list[int], backend: str) -> list[np.ndarray | None]:
    """Each part's keep-mask of its delete positions (None: none deleted), computed for the whole batch
    by one kernel call on the scan's backend (per-file calls cost a transfer and a launch each)."""
    deleted = [p.deleted_rows() for p in parts]
    if not any(len(d) for d in deleted):
        return [None] * len(parts)
    bases = np.cumsum([0, *counts[:-1]])
    rows = np.concatenate([d + base for d, base in zip(deleted, bases, strict=True)])
    keep = masks.rows_keep(rows, sum(counts), backend)
    split = np.split(keep, np.cumsum(counts)[:-1])
    return [k if len(d) else None for k, d in zip(split, deleted, strict=True)]


def _host_batch(
    parts: Sequence[FramePart], counts: list[int], frames: Frames, read: dict[str, Any], names: set[str]
) -> pa.RecordBatch:
    """Host copies of the read schema's top-level columns ``names`` (those a mask reads) for all rows
    of ``parts``."""
    fields = [f for f in parts[0].proj.schema if f.name in names]
    arrays = [
        frames.to_arrow(read[f.name], f.type) if f.name in read else _made(parts, counts, f.name)
        for f in fields
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _made(parts: Sequence[FramePart], counts: Sequence[int], name: str) -> pa.Array:
    """The rows of column ``name``, which the parts' files lack (each its constant, default or nulls)."""
    arrays = []
    for p, n in zip(parts, counts, strict=True):
        make = p.made[name].make
        assert make is not None
        arrays.append(make(n))
    return pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]


def _output(
    parts: Sequence[FramePart],
    keep: Sequence[np.ndarray | None],
    sizes: Sequence[int],
    ctx: TaskContext,
    frames: Frames,
    read: dict[str, Any],
    types: dict[str, pa.DataType],
) -> Any:
    """The output frame: ``parts``' rows where ``keep`` (per part; None: all), ``sizes`` of them each."""
    projection = ctx.projection
    columns: dict[str, Any] = {
        f.name: read[f.name] if f.name in read else frames.from_arrow(_made(parts, sizes, f.name))
        for f in projection.data.fields
    }
    if projection.metadata:  # the file positions of the rows kept, made once for all metadata columns
        kept = [p.positions() if k is None else p.positions()[k] for p, k in zip(parts, keep, strict=True)]
        for f in projection.metadata:
            columns[f.name] = _metadata(f, parts, kept, frames, read, types)
    ordered = [(name, columns[name]) for name in projection.names]
    return frames.assemble(ordered, projection.arrow_schema, sum(sizes))


def _metadata(
    f: NestedField,
    parts: Sequence[FramePart],
    kept: Sequence[np.ndarray],
    frames: Frames,
    read: dict[str, Any],
    types: dict[str, pa.DataType],
) -> Any:
    """Metadata column ``f`` of the rows at file positions ``kept`` (per part). A row-lineage column the
    files store (null where inherited) is read back; one they lack is inherited whole (it has no default:
    the files read it as nulls)."""
    stored = frames.to_arrow(read[f.name], types[f.name]) if f in mc.LINEAGE and f.name in read else None
    if f in mc.LINEAGE:
        return frames.from_arrow(lineage_column(f, [p.task.file for p in parts], kept, stored))
    values, offset = [], 0
    for p, pos in zip(parts, kept, strict=True):
        own = None if stored is None else stored.slice(offset, len(pos))
        offset += len(pos)
        values.append(metadata_column(f, p.task.file, pos, partition_ids=p.partition_ids, stored=own))
    return frames.from_arrow(pa.concat_arrays(values) if len(values) > 1 else values[0])
