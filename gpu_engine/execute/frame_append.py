"""Rows of a frame (a cuDF DataFrame on the device) written as a table's data files, for appends.

:func:`write_frame_data` is the frame path of :func:`gpu_engine.io.parquet_write.write_table_data`: the
frame's columns are matched to the table's current schema by name, its rows split by the default spec's
partition tuple and each partition's rows written by :func:`.frame_write.write_frame` (encoded, metrics
reduced and footers fixed by the frame library). Checked first, naming the column:

- a column the schema lacks, one given twice, or one whose type is not the field's: the frame's types are
  taken as they are or widened (narrower signed integers into ``int``/``long``, ``float`` into ``double``,
  any string or binary type, a timestamp of the field's unit with a time zone into ``timestamptz``), never
  narrowed or reinterpreted (cast such a column first); a ``date`` column may be held as a timestamp (cuDF
  has no date type), whole days only (checked where the rows are);
- a column the frame lacks is filled with its ``write-default`` (nulls for an optional field without
  one), made on the host; a required one is a SchemaMismatch;
- a column with required fields inside (a struct's, a list's elements, a map's values) is conformed on a
  host copy by the host writer's rules (a null where its parent is valid refused; nulls beneath a null
  parent, which Arrow and cuDF keep there, dropped) and copied back.

Rows are split by partition where the frame is (:func:`.frame_partition.split_frame`: keys from a host
copy of the partition source columns). Files are cut at about ``write.target-file-size-bytes`` of the
frame's in-memory bytes per row (encoded files come out smaller, compression being unknown until written;
Java's writers roll on the bytes written). Every file written is deleted when the write fails.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pyarrow as pa

from ..errors import SchemaMismatch
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..io.arrow_conform import conform_batch, write_schema
from ..io.fileio import FileIO
from ..io.write_options import WriteOptions
from .frame_partition import split_frame
from .frame_sink import FrameSink
from .frame_write import write_frame


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
        for key, rows in split_frame(sink, frame, schema, spec, write_schema(schema), backend):
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
    names = sink.column_names(frame)
    if twice := next((name for name in names if names.count(name) > 1), None):
        raise SchemaMismatch(f"column {twice!r} appears twice")
    known = {f.name for f in schema.fields}
    extra = [name for name in names if name not in known]
    if extra:
        raise SchemaMismatch(f"the rows have column(s) {extra} that the table schema lacks")
    n = sink.num_rows(frame)
    columns: list[tuple[str, Any]] = []
    by_host: list[str] = []  # columns conformed on the host (see _conformed_on_host)
    missing: list[str] = []
    for f in target:
        if f.name not in names:
            missing.append(f.name)
            continue
        column = sink.column(frame, f.name)
        have = sink.arrow_type(column)
        if not _takes(have, f.type):
            raise SchemaMismatch(
                f"column {f.name!r} is {have}, the table's field is {f.type}: cast it first (a frame's "
                "columns are written as they are or widened, never narrowed)"
            )
        if pa.types.is_date32(f.type) and pa.types.is_timestamp(have) and sink.times_of_day(column):
            raise SchemaMismatch(f"column {f.name!r}: a date column holds times that are not midnight")
        if _required_inside(f.type):
            by_host.append(f.name)
        else:
            columns.append((f.name, column))
    if missing or by_host:
        columns += _conformed_on_host(sink, frame, schema, missing, by_host, n)
    order = {f.name: i for i, f in enumerate(target)}
    columns.sort(key=lambda c: order[c[0]])
    cast = [(name, sink.cast(col, target.field(name).type)) for name, col in columns]
    return sink.assemble(cast, target, n)


def _conformed_on_host(
    sink: FrameSink, frame: Any, schema: Schema, missing: list[str], nested: list[str], n: int
) -> list[tuple[str, Any]]:
    """The columns ``missing`` from the frame (their write-defaults, nulls without one) and the columns
    ``nested`` with required fields inside (their nulls checked, and nulls under null parents dropped, as
    the host writer does), made by the host writer's :func:`conform_batch` and copied to the frame library.
    A null where a required field has a valid parent is a SchemaMismatch naming the field."""
    fields = tuple(f for f in schema.fields if f.name in missing or f.name in nested)
    sub = Schema(fields)
    target = write_schema(sub)
    given = [
        sink.to_arrow(sink.column(frame, name), sink.arrow_type(sink.column(frame, name))) for name in nested
    ]
    rows = pa.record_batch([*given, pa.nulls(n)], names=[*nested, "\x00"]).select(nested)
    filled = conform_batch(rows, sub, target)
    return [(name, sink.from_arrow(filled.column(name))) for name in filled.schema.names]


def _required_inside(t: pa.DataType) -> bool:
    """Whether a field nested in ``t`` (a struct field, list element, map value) is required."""
    if pa.types.is_struct(t):
        return any(not f.nullable or _required_inside(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return not t.value_field.nullable or _required_inside(t.value_type)
    if pa.types.is_map(t):
        return not t.item_field.nullable or _required_inside(t.key_type) or _required_inside(t.item_type)
    return False


def _takes(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a column of Arrow type ``have`` is written into a field of ``want`` (see the module doc)."""
    if _plain(have) == _plain(want):
        return True
    if _is_string(have) and _is_string(want):
        return True
    if _is_binary(have) and _is_binary(want):
        return True
    if pa.types.is_signed_integer(have) and pa.types.is_signed_integer(want):
        return bool(have.bit_width <= want.bit_width)
    if pa.types.is_floating(have) and pa.types.is_floating(want):
        return bool(have.bit_width <= want.bit_width)
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want) and have.unit == want.unit:
        return (want.tz is None and have.tz is None) or (want.tz is not None and have.tz is not None)
    if pa.types.is_date32(want):  # cuDF holds dates as seconds (whole days checked by the caller)
        return bool(pa.types.is_timestamp(have) and have.tz is None)
    return False


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


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
    if _is_binary(t):
        return "binary"
    return t
