"""A frame's rows written as Parquet data files of one partition (cuDF: encoded on the device).

The frame path of the write half, for writers whose rows are in a frame already (compaction on cuDF):
:func:`write_frame` writes consecutive row ranges of one frame as files, several in one encoder call.
The caller cuts the rows into files (compaction: its expected output files); the rows are of one
partition of ``spec`` (a compaction group's), not split here. Per file:

1. the frame library encodes it into a local staging file (:meth:`FrameSink.encode
   <gpu_engine.execute.frame_sink.FrameSink.encode>`: table properties' codec, row group, page and
   dictionary sizes);
2. its footer gets the Iceberg schema: field ids, timestamp UTC flags, dates
   (:func:`~gpu_engine.io.parquet_footer_schema.conform_file`);
3. metrics: counts and bounds of each primitive column reduced by the library where the rows are (one
   small result per column copied back), serialized per ``write.metadata.metrics.*`` as the host writer
   does (:mod:`gpu_engine.io.column_metrics`); nested columns are counted on a host copy of the column;
4. published create-exclusively (never overwriting), its manifest entry made from its footer.

What the library cannot write as the spec and the properties ask (a codec, a compression level, a column
type: :meth:`FrameSink.encode_unsupported`) is an UnsupportedFeature naming it, before anything is
written: the caller writes such rows with the host writer and records why. On failure every file this
call wrote is deleted.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFileError, SchemaMismatch, UnsupportedFeature
from ..iceberg import types as it
from ..iceberg.content_file import ContentFile
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema
from ..iceberg.sorting import SortOrder
from ..io.arrow_conform import write_schema
from ..io.column_metrics import ColumnMetrics, MetricsCollector
from ..io.file_publish import data_file_entry, leaf_field_ids, publish, staging_path
from ..io.fileio import FileIO
from ..io.locations import LocationProvider, location_provider
from ..io.metrics_config import MetricsConfig, metrics_config
from ..io.parquet_footer_schema import conform_file
from ..io.parquet_write import NOTHING_STORED
from ..io.partition_split import partition_path
from ..io.write_options import WriteOptions
from .frame_sink import FrameSink


def write_frame(
    io: FileIO,
    location: str | LocationProvider,
    schema: Schema,
    spec: PartitionSpec,
    partition: tuple[Any, ...],
    frame: Any,
    sink: FrameSink,
    rows: Sequence[int],
    *,
    properties: Mapping[str, str] | None = None,
    spec_id: int | None = None,
    sort_order: SortOrder | None = None,
    table_order: SortOrder | None = None,
) -> list[ContentFile]:
    """Write ``frame`` (of ``sink``; its columns named as ``schema``'s fields, in any order) as
    ``len(rows)`` data files of ``partition`` in ``spec``, ``rows[i]`` rows in file ``i``; see the module
    doc. ``location``, ``properties``, ``spec_id``, ``sort_order`` and ``table_order`` as for
    :func:`~gpu_engine.io.parquet_write.write_data_files`."""
    props = dict(properties or {})
    provider = location_provider(location, props)
    config = metrics_config(schema, props, sort_order=sort_order, table_order=table_order)
    options = WriteOptions.from_properties(props)
    target = write_schema(schema)
    why = sink.encode_unsupported(target, options)
    if why is not None:
        raise UnsupportedFeature(f"{sink.name} cannot write these rows as the table asks: {why}")
    if len(target) == 0 and sum(rows) > 0:
        raise UnsupportedFeature(NOTHING_STORED)
    if any(n <= 0 for n in rows) or sum(rows) != sink.num_rows(frame):
        raise ValueError(f"file row counts {list(rows)} do not add up to the frame's {sink.num_rows(frame)}")
    frame = _conformed(sink, frame, target)
    ppath = partition_path(spec, schema, partition) if spec.fields else None
    prefix = str(uuid.uuid4())
    paths = [provider.new_data_location(f"{prefix}-{i:05d}.parquet", ppath) for i in range(len(rows))]
    targets = [io.resolve(p) for p in paths]
    staged = [staging_path(io, t, os.path.basename(p)) for t, p in zip(targets, paths, strict=True)]
    ids = leaf_field_ids(target)
    done: list[ContentFile] = []
    try:
        sink.encode(frame, target, staged, rows, options)
        start = 0
        for path, resolved, tmp, n in zip(paths, targets, staged, rows, strict=True):
            conform_file(tmp, schema)
            md = pq.read_metadata(tmp)
            if md.num_rows != n:
                raise DataFileError(f"{path}: {sink.name} wrote {md.num_rows} rows, {n} were given")
            _sync(tmp)
            metrics = frame_metrics(sink, sink.slice(frame, start, n), schema, target, config)
            entry = data_file_entry(
                path, md, os.path.getsize(tmp), metrics, ids, config,
                spec_id=spec.spec_id if spec_id is None else spec_id, partition=partition,
                sort_order_id=None if sort_order is None else sort_order.order_id,
            )  # fmt: skip
            publish(io, tmp, resolved, path)
            done.append(entry)
            start += n
    except BaseException:
        for tmp in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for entry in done:
            with contextlib.suppress(Exception):
                io.delete(io.resolve(entry.path), missing_ok=True)
        raise
    return done


def frame_metrics(
    sink: FrameSink, frame: Any, schema: Schema, arrow_schema: pa.Schema, config: MetricsConfig
) -> ColumnMetrics:
    """The column metrics of ``frame``'s rows (columns as ``arrow_schema``'s fields; see the module doc)."""
    collector = MetricsCollector(schema, config)
    n = sink.num_rows(frame)
    for f in schema.fields:
        index = arrow_schema.get_field_index(f.name)
        if index < 0:  # an unknown column: not written
            continue
        column = sink.column(frame, f.name)
        if isinstance(f.type, it.PrimitiveType):
            counts, bounds = collector.wanted(f.field_id, f.type)
            if counts:
                collector.add_stats(f.field_id, n, sink.leaf_stats(column, f.type, bounds))
        else:
            host = sink.to_arrow(column, arrow_schema.field(index).type)
            collector.add(pa.table([host], schema=pa.schema([arrow_schema.field(index)])))
    return collector.result()


def _conformed(sink: FrameSink, frame: Any, target: pa.Schema) -> Any:
    """``frame``'s columns of ``target`` in its order and types; a null in a required column is a
    SchemaMismatch naming it (the host writer's check, on the frame's null counts)."""
    columns = []
    for f in target:
        try:
            column = sink.column(frame, f.name)
        except KeyError:
            raise SchemaMismatch(f"the rows have no column {f.name!r}") from None
        if not f.nullable and sink.null_count(column):
            raise SchemaMismatch(f"column {f.name!r} is required but holds {sink.null_count(column)} null(s)")
        columns.append((f.name, sink.cast(column, f.type)))
    return sink.assemble(columns, target, sink.num_rows(frame))


def _sync(path: str) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
