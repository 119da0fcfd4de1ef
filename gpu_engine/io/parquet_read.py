"""The read half of a scan: one Parquet data file read by Iceberg field id, a row group at a time.

``ParquetSource.open(io, path)`` reads the footer (a missing, truncated or non-Parquet file is a
:class:`DataFileError` naming it); :meth:`ParquetSource.batches` streams :class:`FileBatch` es of exactly
``to_arrow_schema(schema)`` with their file row positions, skipping whole row groups whose statistics
prove that no row matches the residual (rows themselves are never filtered here: deletes apply first).
Memory follows the largest row group: each is read in batches of at most ``batch_size`` rows.
Page checksums are verified where the writer stored them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFileError, GpuEngineError, UnsupportedFeature
from ..expressions import TRUE, AlwaysTrue, Expression, bind
from ..expressions.tree import BoundReference
from ..iceberg import serde
from ..iceberg.name_mapping import NameMapping
from ..iceberg.schema import Schema
from ..planning.metrics import ColumnStats, might_match
from . import parquet_types
from .fileio import FileIO
from .parquet_projection import LeafColumn, Projection, project

_BYTES = frozenset({"BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"})
_OLD_WRITERS = {"parquet-mr": (1, 10), "parquet-cpp": (1, 3)}  # binary statistics in signed byte order before
_WRITER = re.compile(r"^(parquet-mr|parquet-cpp) version (\d+)\.(\d+)")


@dataclass(frozen=True)
class FileBatch:
    batch: pa.RecordBatch  # exactly to_arrow_schema(schema) (names = Iceberg field names)
    first_pos: int  # file row position of the batch's row 0; rows of a batch are consecutive positions


def _read_error(path: str, exc: BaseException) -> GpuEngineError:
    if isinstance(exc, pa.ArrowNotImplementedError):
        return UnsupportedFeature(f"{path}: pyarrow cannot read this Parquet file: {exc}")
    return DataFileError(f"{path}: unreadable Parquet data: {exc}")


@dataclass
class ParquetSource:
    """An open Parquet data file. Close it (or use it as a context manager) when done."""

    io: FileIO
    path: str
    file: pq.ParquetFile
    _handles: list[BinaryIO] = field(default_factory=list, repr=False)
    _by_unit: dict[str, pq.ParquetFile] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, io: FileIO, path: str, *, role: str = "data file") -> ParquetSource:
        """Open ``path`` (already resolved) and read its footer; errors call the file a ``role``."""
        handle = _open(io, path, role)
        try:
            file = _parquet_file(handle, path, None, "us")
        except BaseException:
            handle.close()
            raise
        return cls(io, path, file, [handle], {"us": file})

    @property
    def metadata(self) -> pq.FileMetaData:
        return self.file.metadata

    @property
    def num_rows(self) -> int:
        return int(self.metadata.num_rows)

    @property
    def arrow_schema(self) -> pa.Schema:
        """pyarrow's Arrow schema of the file (INT96 timestamps in microseconds)."""
        return self.file.schema_arrow

    def close(self) -> None:
        for h in self._handles:
            h.close()
        self._handles.clear()
        self._by_unit.clear()

    def __enter__(self) -> ParquetSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def row_groups_in(self, start: int, length: int | None) -> list[int]:
        """Row groups whose first byte (dictionary page if any, else first data page, of the first column
        chunk) lies in ``[start, start + length)``; ``length`` None: to the end of the file."""
        end = None if length is None else start + length
        out = []
        for i in range(self.metadata.num_row_groups):
            offset = _starting_offset(self.metadata.row_group(i))
            if offset is not None and start <= offset and (end is None or offset < end):
                out.append(i)
        return out

    def projection(
        self,
        schema: Schema,
        *,
        name_mapping: NameMapping | None = None,
        constants: Mapping[int, Any] | None = None,
    ) -> Projection:
        """How this file's columns produce ``schema`` (see :func:`parquet_projection.project`)."""
        physical = [self.metadata.schema.column(i).physical_type for i in range(self.metadata.num_columns)]

        def build(arrow_schema: pa.Schema) -> Projection:
            return project(
                self.path,
                arrow_schema,
                schema,
                physical_types=physical,
                name_mapping=name_mapping,
                constants=constants,
            )

        proj = build(self.arrow_schema)
        if proj.int96_unit != "us":  # decode INT96 in the unit the reads need
            proj = build(self._file(proj.int96_unit).schema_arrow)
        return proj

    def batches(
        self,
        schema: Schema,
        *,
        row_groups: Sequence[int] | None = None,
        residual: Expression = TRUE,
        name_mapping: NameMapping | None = None,
        case_sensitive: bool = True,
        batch_size: int = 1 << 17,
        constants: Mapping[int, Any] | None = None,
    ) -> Iterator[FileBatch]:
        """The rows of ``row_groups`` (all by default, in file order) as batches of ``schema``.

        Row groups whose statistics prove that no row matches ``residual`` (bound to ``schema`` or
        unbound) are skipped; ``constants`` give values of fields the file lacks (identity partitions).
        """
        proj = self.projection(schema, name_mapping=name_mapping, constants=constants)
        groups = self.selected_row_groups(proj, schema, row_groups, residual, case_sensitive=case_sensitive)
        starts = self.row_group_starts()
        for i in groups:
            yield from self._row_group(proj, i, starts[i], batch_size)

    def row_group_starts(self) -> list[int]:
        """The file row position of each row group's first row, and the file's row count last."""
        md = self.metadata
        starts = [0]
        for i in range(md.num_row_groups):
            starts.append(starts[-1] + md.row_group(i).num_rows)
        return starts

    def selected_row_groups(
        self,
        proj: Projection,
        schema: Schema,
        row_groups: Sequence[int] | None,
        residual: Expression,
        *,
        case_sensitive: bool = True,
    ) -> list[int]:
        """``row_groups`` (all by default) less those whose statistics prove that no row matches
        ``residual``; an index the file lacks is a :class:`DataFileError`."""
        md = self.metadata
        groups = list(range(md.num_row_groups)) if row_groups is None else list(row_groups)
        for i in groups:
            if not 0 <= i < md.num_row_groups:
                raise DataFileError(f"{self.path}: no row group {i} (the file has {md.num_row_groups})")
        if not isinstance(residual, AlwaysTrue) and groups:
            bound = bind(residual, schema, case_sensitive=case_sensitive)
            mask = might_match(bound, len(groups), self._stats_for(proj, groups)).to_pylist()
            groups = [g for g, keep in zip(groups, mask, strict=True) if keep]
        return groups

    def _row_group(self, proj: Projection, index: int, first: int, batch_size: int) -> Iterator[FileBatch]:
        expected = self.metadata.row_group(index).num_rows
        seconds = None
        try:
            if proj.int96_columns:
                seconds = self._file("s").read_row_group(index, columns=list(proj.int96_columns))
            reader = self._file(proj.int96_unit).iter_batches(
                batch_size=batch_size, row_groups=[index], columns=list(proj.columns)
            )
        except (OSError, pa.ArrowException) as exc:
            raise _read_error(self.path, exc) from None
        done = 0
        while True:
            try:
                batch = next(reader, None)
            except (OSError, pa.ArrowException) as exc:
                raise _read_error(self.path, exc) from None
            if batch is None:
                break
            n = batch.num_rows
            if done + n > expected:
                break
            sec = None if seconds is None else seconds.slice(done, n)
            yield FileBatch(proj.apply(batch, sec), first + done)
            done += n
        if done != expected:
            raise DataFileError(
                f"{self.path}: row group {index} decodes to a different number of rows than its "
                f"metadata says ({expected})"
            )

    def _file(self, unit: str) -> pq.ParquetFile:
        """The file with INT96 timestamps decoded in ``unit`` (one handle per unit)."""
        if unit not in self._by_unit:
            handle = _open(self.io, self.path, "data file")
            self._handles.append(handle)
            self._by_unit[unit] = _parquet_file(handle, self.path, self.metadata, unit)
        return self._by_unit[unit]

    def _stats_for(self, proj: Projection, groups: Sequence[int]) -> Any:
        md = self.metadata
        trusted_bytes = _trusts_binary_stats(md.created_by)

        def stats(ref: BoundReference) -> ColumnStats:
            leaf = proj.leaves.get(ref.field_id)
            if leaf is None or (leaf.physical_type in _BYTES and not trusted_bytes):
                return ColumnStats()
            return _column_stats(md, groups, leaf)

        return stats


def _column_stats(md: pq.FileMetaData, groups: Sequence[int], leaf: LeafColumn) -> ColumnStats:
    lower: list[Any] = []
    upper: list[Any] = []
    nulls: list[int | None] = []
    rows: list[int] = []
    for i in groups:
        rg = md.row_group(i)
        rows.append(rg.num_rows)
        st = rg.column(leaf.index).statistics
        nulls.append(st.null_count if st is not None and st.has_null_count else None)
        lo = hi = None
        if st is not None and st.has_min_max:
            lo = parquet_types.stats_value(st.min_raw, leaf.file_type, leaf.physical_type, leaf.type)
            hi = parquet_types.stats_value(st.max_raw, leaf.file_type, leaf.physical_type, leaf.type)
        lower.append(lo)
        upper.append(hi)
    null_count = pa.array(nulls, pa.int64())
    value_count = pa.array(rows, pa.int64())
    all_null = pa.array([None if n is None else n == r for n, r in zip(nulls, rows, strict=True)], pa.bool_())
    try:
        physical = serde.physical_arrow_type(leaf.type)
        lows, highs = pa.array(lower, physical), pa.array(upper, physical)
    except (pa.ArrowException, GpuEngineError, OverflowError):
        return ColumnStats(None, None, null_count, None, value_count, all_null)
    return ColumnStats(lows, highs, null_count, None, value_count, all_null)


def _trusts_binary_stats(created_by: str | None) -> bool:
    """Whether min/max of BYTE_ARRAY/FIXED_LEN_BYTE_ARRAY columns are in unsigned (and, for decimals,
    two's-complement) order: not for parquet-mr before 1.10, parquet-cpp before 1.3, or unknown writers."""
    if not created_by:
        return False
    m = _WRITER.match(created_by)
    if m is None:
        return True
    return (int(m.group(2)), int(m.group(3))) >= _OLD_WRITERS[m.group(1)]


def _starting_offset(rg: pq.RowGroupMetaData) -> int | None:
    if rg.num_columns == 0:
        return None
    col = rg.column(0)
    offset = int(col.data_page_offset)
    dictionary = col.dictionary_page_offset if col.has_dictionary_page else None
    if dictionary is not None and 0 < dictionary < offset:
        offset = int(dictionary)
    return offset


def _open(io: FileIO, path: str, role: str) -> BinaryIO:
    try:
        return io.open_input(path)
    except FileNotFoundError:
        raise DataFileError(f"{path}: {role} not found") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot open {role}: {exc}") from None


def _parquet_file(handle: BinaryIO, path: str, metadata: pq.FileMetaData | None, unit: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(
            handle, metadata=metadata, coerce_int96_timestamp_unit=unit, page_checksum_verification=True
        )
    except (OSError, pa.ArrowException) as exc:
        if _encrypted(handle):
            raise UnsupportedFeature(f"{path}: encrypted Parquet files are not supported") from None
        raise DataFileError(f"{path}: not a readable Parquet file: {exc}") from None


def _encrypted(handle: BinaryIO) -> bool:
    try:
        handle.seek(-4, 2)
        return handle.read(4) == b"PARE"
    except OSError:
        return False
