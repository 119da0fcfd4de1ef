"""Rows of a frame (a cuDF DataFrame on the device) written as a table's data files, for appends.

:func:`write_frame_data` is the frame path of :func:`gpu_engine.io.parquet_write.write_table_data`: the
frame's columns are matched to the table's current schema by name, its rows split by the default spec's
partition tuple and each partition's rows written by :func:`.frame_write.write_frame` (encoded, metrics
reduced and footers fixed by the frame library). Checked first, naming the column:

- a column the schema lacks, or one whose type is not the field's: the frame's types are taken as they are
  or widened (narrower signed integers into ``int``/``long``, ``float`` into ``double``, any string type,
  a timestamp of the field's unit with a time zone into ``timestamptz``), never narrowed or reinterpreted
  (cast such a column first); a ``date`` column may be held as seconds (cuDF has no date type), whole days
  only (checked where the rows are);
- a column the frame lacks is filled with its ``write-default`` (nulls for an optional field without
  one), made on the host; a required one is a SchemaMismatch.

Partition keys are computed on the host from a copy of the partition source columns only (the transform
kernels of ``backend``); each partition's rows are gathered where the frame is. Files are cut at about
``write.target-file-size-bytes`` of the frame's in-memory bytes per row (encoded files come out smaller,
compression being unknown until written; Java's writers roll on the bytes written). Every file written is
deleted when the write fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import SchemaMismatch
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..io.arrow_conform import conform_batch, write_schema
from ..io.fileio import FileIO
from ..io.partition_split import split_by_partition
from ..io.write_options import WriteOptions
from .frame_sink import FrameSink
from .frame_write import write_frame

_ROW = "\x00row"  # the row index column of the partition source copy (no Iceberg name holds a NUL)


def write_frame_data(
    io: FileIO, md: TableMetadata, frame: Any, sink: FrameSink, *, backend: str = "auto"
) -> list[ContentFile]:
    """Write ``frame``'s rows as data files of ``md``'s current schema and default spec (see the module
    doc); nothing for a frame without rows."""
    schema, spec = md.schema, md.spec
    frame = conform_frame(sink, frame, schema)
    n = sink.num_rows(frame)
    if n == 0:
        return []
    options = WriteOptions.from_properties(md.properties)
    per_file = max(1, int(options.target_file_size_bytes / max(sink.nbytes(frame) / n, 1.0)))
    written: list[ContentFile] = []
    try:
        for key, rows in _partitions(sink, frame, schema, md, backend):
            m = sink.num_rows(rows)
            cuts = [per_file] * (m // per_file) + ([m % per_file] if m % per_file else [])
            written += write_frame(
                io, md.location, schema, spec, key, rows, sink, cuts, properties=md.properties,
                table_order=md.sort_order,
            )  # fmt: skip
    except BaseException:
        for f in written:
            with contextlib.suppress(Exception):
                io.delete(io.resolve(f.path), missing_ok=True)
        raise
    return written


def conform_frame(sink: FrameSink, frame: Any, schema: Schema) -> Any:
    """``frame`` as ``schema``'s write columns (see the module doc)."""
    target = write_schema(schema)
    known = {f.name for f in schema.fields}
    extra = [name for name in sink.column_names(frame) if name not in known]
    if extra:
        raise SchemaMismatch(f"the rows have column(s) {extra} that the table schema lacks")
    n = sink.num_rows(frame)
    columns: list[tuple[str, Any]] = []
    missing: list[str] = []
    for f in target:
        try:
            column = sink.column(frame, f.name)
        except KeyError:
            missing.append(f.name)
            continue
        have = sink.arrow_type(column)
        if not _takes(have, f.type):
            raise SchemaMismatch(
                f"column {f.name!r} is {have}, the table's field is {f.type}: cast it first (a frame's "
                "columns are written as they are or widened, never narrowed)"
            )
        columns.append((f.name, column))
    if missing:
        fields = tuple(f for f in schema.fields if f.name in missing)
        rows_only = pa.record_batch([pa.nulls(n)], names=["_"]).select([])
        filled = conform_batch(rows_only, Schema(fields), write_schema(Schema(fields)))
        columns += [(name, sink.from_arrow(filled.column(name))) for name in filled.schema.names]
    order = {f.name: i for i, f in enumerate(target)}
    columns.sort(key=lambda c: order[c[0]])
    cast = [(name, sink.cast(col, target.field(name).type)) for name, col in columns]
    return sink.assemble(cast, target, n)


def _takes(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a column of Arrow type ``have`` is written into a field of ``want`` (see the module doc)."""
    if _plain(have) == _plain(want):
        return True
    if _is_string(have) and _is_string(want):
        return True
    if pa.types.is_signed_integer(have) and pa.types.is_signed_integer(want):
        return bool(have.bit_width <= want.bit_width)
    if pa.types.is_floating(have) and pa.types.is_floating(want):
        return bool(have.bit_width <= want.bit_width)
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want) and have.unit == want.unit:
        return (want.tz is None and have.tz is None) or (want.tz is not None and have.tz is not None)
    if pa.types.is_date32(want):  # cuDF's dates: seconds (whole days checked when encoded)
        return bool(pa.types.is_timestamp(have) and have.tz is None)
    return False


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _plain(t: pa.DataType) -> Any:
    """``t`` without field names' metadata and nullability, for comparing nested types."""
    if pa.types.is_struct(t):
        return ("struct", tuple((t.field(i).name, _plain(t.field(i).type)) for i in range(t.num_fields)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("list", _plain(t.value_type))
    if pa.types.is_map(t):
        return ("map", _plain(t.key_type), _plain(t.item_type))
    if _is_string(t):
        return "string"
    return t


def _partitions(
    sink: FrameSink, frame: Any, schema: Schema, md: TableMetadata, backend: str
) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(partition tuple, that partition's rows) of ``frame`` in the default spec, first seen first."""
    spec = md.spec
    n = sink.num_rows(frame)
    if not spec.fields:
        yield (), frame
        return
    target = write_schema(schema)
    tops = sorted({schema.paths_by_id[f.source_id][0] for f in spec.fields if f.transform != "void"})
    host = [sink.to_arrow(sink.column(frame, name), target.field(name).type) for name in tops]
    batch = pa.record_batch([*host, pa.array(np.arange(n, dtype=np.int64))], names=[*tops, _ROW])
    for key, part in split_by_partition(batch, schema, spec, backend):
        if part.num_rows == n:
            yield key, frame
        else:
            yield key, sink.take(frame, part.column(_ROW).to_numpy())
