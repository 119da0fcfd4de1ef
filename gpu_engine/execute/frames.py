"""Data frames a scan can decode into: the few operations :mod:`.frame_task` needs from a frame library.

cuDF's (:mod:`gpu_engine.backend.cudf_frames`) decodes Parquet on the device and keeps the rows there;
:class:`ArrowFrames` does the same steps with pyarrow on the host. It is the twin the frame path is
tested with where no GPU is (as numba's simulator is for the kernels): a scan through it must return
exactly what ``to_arrow`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DataFileError
from ..iceberg import types as it
from ..io.column_metrics import LeafStats, min_max
from ..io.fileio import FileIO
from ..io.write_options import WriteOptions


class Frames(Protocol):
    """A frame library: frames of named columns; columns of one type each (both opaque here)."""

    name: str

    def unsupported(self, schema: pa.Schema) -> str | None:
        """Why the library cannot hold a column of ``schema`` (naming it), or None."""
        ...

    def read(self, io: FileIO, sources: Sequence[tuple[str, Sequence[int]]], columns: Sequence[str]) -> Any:
        """The top-level ``columns`` of each source's row groups (a Parquet file's path and row-group
        indexes, in file order), the sources' rows one after another, as stored (file column names and
        types, the same in every source)."""
        ...

    def num_rows(self, frame: Any) -> int: ...

    def column(self, frame: Any, name: str) -> Any: ...

    def null_count(self, column: Any) -> int: ...

    def cast(self, column: Any, target: pa.DataType) -> Any:
        """``column`` as :meth:`from_arrow` holds an Arrow array of type ``target``."""
        ...

    def from_arrow(self, array: pa.Array) -> Any: ...

    def to_arrow(self, column: Any, target: pa.DataType) -> pa.Array:
        """A host copy of ``column`` as an Arrow array of type ``target``."""
        ...

    def mask(self, keep: np.ndarray) -> Any:
        """The bool row mask ``keep`` as :meth:`filter` takes it (moved to the device once)."""
        ...

    def filter(self, column: Any, mask: Any) -> Any:
        """The rows of ``column`` where ``mask`` (from :meth:`mask`) is set."""
        ...

    def assemble(self, columns: Sequence[tuple[str, Any]], schema: pa.Schema, num_rows: int) -> Any:
        """A frame of ``columns`` (named and ordered as ``schema``'s fields) of ``num_rows`` rows."""
        ...

    def from_arrow_table(self, table: pa.Table) -> Any: ...

    def head(self, frame: Any, n: int) -> Any: ...

    def concat(self, frames: Sequence[Any], schema: pa.Schema) -> Any:
        """The rows of ``frames`` in order (an empty frame of ``schema`` when there are none)."""
        ...


class ArrowFrames:
    """Frames as pyarrow Tables on the host (the twin of cuDF's, for tests without a GPU)."""

    name = "arrow"

    def unsupported(self, schema: pa.Schema) -> str | None:
        return None

    def read(
        self, io: FileIO, sources: Sequence[tuple[str, Sequence[int]]], columns: Sequence[str]
    ) -> pa.Table:
        tables = []
        for path, row_groups in sources:
            with io.open_input(path) as handle:
                try:
                    parquet = pq.ParquetFile(handle, page_checksum_verification=True)  # as the host reader
                    table = parquet.read_row_groups(list(row_groups), columns=list(columns))
                except (OSError, pa.ArrowException) as exc:
                    raise DataFileError(f"{path}: unreadable Parquet data: {exc}") from None
            tables.append(table.replace_schema_metadata(None))
        if len(tables) == 1:
            return tables[0]
        # files of one Parquet schema may still differ in nullability (a field made optional later) and in
        # the Arrow type hint their writer stored (string or large_string, a time zone's spelling): read as
        # the first file's types, nullable, as cuDF reads them
        first = pa.schema([f.with_nullable(True) for f in tables[0].schema])
        try:
            tables = [t if t.schema.equals(first) else t.cast(first) for t in tables]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            paths = ", ".join(path for path, _ in sources)
            raise DataFileError(f"{paths}: files read together hold different column types: {exc}") from None
        return pa.concat_tables(tables)

    def num_rows(self, frame: pa.Table) -> int:
        return int(frame.num_rows)

    def column(self, frame: pa.Table, name: str) -> pa.Array:
        return frame.column(name).combine_chunks()

    def null_count(self, column: pa.Array) -> int:
        return int(column.null_count)

    def cast(self, column: pa.Array, target: pa.DataType) -> pa.Array:
        if column.type == target:
            return column
        if (
            pa.types.is_timestamp(column.type)
            and pa.types.is_timestamp(target)
            and column.type.tz != target.tz
        ):
            return column.view(target)  # the UTC adjustment reinterpreted, as the host reader does
        return column.cast(target)

    def from_arrow(self, array: pa.Array) -> pa.Array:
        return array

    def to_arrow(self, column: pa.Array, target: pa.DataType) -> pa.Array:
        return column if column.type == target else column.cast(target)

    def mask(self, keep: np.ndarray) -> pa.BooleanArray:
        return pa.array(keep, pa.bool_())

    def filter(self, column: pa.Array, mask: pa.BooleanArray) -> pa.Array:
        return column.filter(mask)

    def assemble(self, columns: Sequence[tuple[str, Any]], schema: pa.Schema, num_rows: int) -> pa.Table:
        if not columns:
            return no_columns(num_rows, schema)
        return pa.Table.from_arrays([c for _, c in columns], schema=schema)

    def from_arrow_table(self, table: pa.Table) -> pa.Table:
        return table

    def head(self, frame: pa.Table, n: int) -> pa.Table:
        return frame.slice(0, n)

    def concat(self, frames: Sequence[pa.Table], schema: pa.Schema) -> pa.Table:
        if not len(schema):  # rows without columns: concatenating would lose the row count
            return no_columns(sum(f.num_rows for f in frames), schema)
        if not frames:
            return schema.empty_table()
        return pa.concat_tables(frames)

    # -- writing (the :class:`~.frame_sink.FrameSink` twin of cuDF's) --------------------------------

    def encode_unsupported(self, schema: pa.Schema, options: WriteOptions) -> str | None:
        if options.bloom_filters:  # as cuDF's writer: the table asks for what this encoder does not write
            column = options.bloom_filters[0][0]
            return (
                f"table property write.parquet.bloom-filter-enabled.column.{column}: the frame writer writes "
                "no bloom filters (cuDF's writes none)"
            )
        return None

    def encode(
        self,
        frame: pa.Table,
        schema: pa.Schema,
        paths: Sequence[str],
        rows: Sequence[int],
        options: WriteOptions,
    ) -> None:
        # written as cuDF writes: no field ids, every timestamp flagged UTC, dates as plain INT32 days
        plain = pa.schema([_as_cudf_writes(f) for f in schema])
        table = frame.select(schema.names).cast(plain)
        start = 0
        for path, n in zip(paths, rows, strict=True):
            part = table.slice(start, n)
            start += n
            per_row = part.nbytes / n if n else 0.0
            group = options.row_group_rows(per_row) if per_row else None
            pq.write_table(
                part, path, row_group_size=group, version="2.6", compression=options.compression_codec,
                compression_level=options.compression_level, **options.page_options(),
                store_decimal_as_integer=True, store_schema=False,
            )  # fmt: skip

    def column_names(self, frame: pa.Table) -> list[str]:
        return list(frame.column_names)

    def arrow_type(self, column: pa.Array) -> pa.DataType:
        return column.type

    def times_of_day(self, column: pa.Array) -> bool:
        ticks = column.view(pa.int64())
        per_day = pa.scalar(_PER_DAY[column.type.unit], pa.int64())
        rest = pc.subtract(ticks, pc.multiply(pc.divide(ticks, per_day), per_day))
        return bool(pc.any(pc.not_equal(rest, 0)).as_py())

    def nbytes(self, frame: pa.Table) -> int:
        return int(frame.nbytes)

    def take(self, frame: pa.Table, rows: np.ndarray) -> pa.Table:
        return frame.take(pa.array(rows, pa.int64()))

    def slice(self, frame: pa.Table, start: int, n: int) -> pa.Table:
        return frame.slice(start, n)

    def leaf_stats(self, column: pa.Array, t: it.PrimitiveType, bounds: bool) -> LeafStats:
        nans = 0
        if t.name in ("float", "double"):
            nans = int(pc.sum(pc.is_nan(column)).as_py() or 0)
        if not bounds or column.null_count == len(column):
            return LeafStats(column.null_count, nans)
        return LeafStats(column.null_count, nans, *min_max(column, t))


_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def _as_cudf_writes(f: pa.Field) -> pa.Field:
    """``f`` as cuDF's Parquet writer stores it (see :meth:`ArrowFrames.encode`)."""
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_as_cudf_writes(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_as_cudf_writes(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(_as_cudf_writes(t.key_field), _as_cudf_writes(t.item_field))
    elif pa.types.is_timestamp(t):
        t = pa.timestamp(t.unit, "UTC")
    elif pa.types.is_date32(t):
        t = pa.int32()
    return pa.field(f.name, t, f.nullable)


def no_columns(num_rows: int, schema: pa.Schema) -> pa.Table:
    """A table of ``num_rows`` rows and no columns, with ``schema``'s metadata (built from a batch:
    a Table's ``replace_schema_metadata`` drops the row count of a table without columns)."""
    batch = pa.record_batch([pa.nulls(num_rows)], names=["_"]).select([])
    return pa.Table.from_batches([batch.replace_schema_metadata(schema.metadata)])
