"""The bytes Parquet row groups take once decoded (as Arrow or cuDF columns), estimated from footers.

What a frame path holds (a decoder call's rows, a group held whole) is decoded rows, and stored bytes
say little about them: a column of a few distinct long strings stores as a dictionary and a few bits a
row (a million rows of 42-character strings in 10 KB, uncompressed) and decodes to the strings
themselves (50 MB). The footer's uncompressed sizes (a row group's ``total_byte_size``) count those
dictionary-encoded pages, so they miss it too. The estimate, per column chunk, its values at their
decoded width: fixed-width types at the width a decoder gives them (decimals: 16 bytes); strings and
binaries at an offset and the mean of the chunk's smallest and largest value's lengths (from its
statistics), and no less than their uncompressed pages (plain pages hold each value and its length; a
chunk without statistics counts those). Validity bitmaps and the offsets of nested lists are left out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from ..io.fileio import FileIO
from ..io.parquet_read import ParquetSource
from ..tasks import ScanTask

_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 8, "FLOAT": 4, "DOUBLE": 8}
_OFFSET = 4  # bytes of a string's or binary's offset
_DECIMAL = 16  # bytes of a decimal of up to 38 digits, however it is stored


def decoded_bytes(
    md: pq.FileMetaData,
    row_groups: Iterable[int],
    columns: Collection[str] | None = None,
    arrow_schema: pa.Schema | None = None,
) -> int:
    """The estimated decoded bytes (see the module doc) of the row groups ``row_groups`` of the file whose
    footer is ``md``: of its top-level ``columns`` only where given with the file's ``arrow_schema``
    (pyarrow's; all columns where its leaves do not match the footer's)."""
    leaves = _leaves(md, columns, arrow_schema)
    widths = {i: _width(md.schema.column(i)) for i in leaves}
    total = 0
    for g in row_groups:
        rg = md.row_group(g)
        for i in leaves:
            chunk = rg.column(i)
            width = widths[i]
            if width is not None:
                total += int(chunk.num_values) * width
            else:  # a string or binary: by its statistics and pages
                by_stats = int(chunk.num_values) * (_OFFSET + _mean_length(chunk.statistics))
                total += max(int(chunk.total_uncompressed_size), by_stats)
    return total


def tasks_decoded_bytes(io: FileIO, tasks: Sequence[ScanTask], workers: int = 1) -> int:
    """The estimated decoded bytes of every column of the row groups ``tasks`` read (rows deletes remove
    included), from their files' footers, each read once, on ``workers`` threads. A file of another format
    counts its tasks' stored bytes."""
    by_file: dict[str, list[ScanTask]] = {}
    stored = 0
    for task in tasks:
        if task.file.file_format.upper() != "PARQUET":
            stored += task.length
        else:
            by_file.setdefault(task.file.path, []).append(task)

    def one(item: tuple[str, list[ScanTask]]) -> int:
        path, split = item
        with ParquetSource.open(io, path) as source:
            groups = sorted({g for t in split for g in source.row_groups_in(*t.byte_range)})
            return decoded_bytes(source.metadata, groups)

    if workers <= 1 or len(by_file) <= 1:
        return stored + sum(map(one, by_file.items()))
    with ThreadPoolExecutor(min(workers, len(by_file))) as pool:
        return stored + sum(pool.map(one, by_file.items()))


def _leaves(
    md: pq.FileMetaData, columns: Collection[str] | None, arrow_schema: pa.Schema | None
) -> list[int]:
    """The footer's leaf columns under the top-level ``columns`` (all where not known)."""
    every = list(range(md.num_columns))
    if columns is None or arrow_schema is None:
        return every
    out: list[int] = []
    first = 0
    for f in arrow_schema:
        n = _leaf_count(f.type)
        if f.name in columns:
            out += range(first, first + n)
        first += n
    return out if first == md.num_columns else every


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    return 1


def _width(column: pq.ColumnSchema) -> int | None:
    """Decoded bytes a value of the leaf ``column`` (None: strings and binaries, of their own lengths)."""
    if column.logical_type.type == "DECIMAL":
        return max(_DECIMAL, column.length or 0)
    if column.physical_type == "FIXED_LEN_BYTE_ARRAY":
        return int(column.length)
    return _WIDTHS.get(column.physical_type)


def _mean_length(stats: pq.Statistics | None) -> int:
    """The mean length in bytes of a string or binary chunk's smallest and largest value (0: unknown)."""
    if stats is None or not stats.has_min_max:
        return 0
    sizes = [len(v.encode()) if isinstance(v, str) else len(v) for v in (stats.min, stats.max)]
    return (sizes[0] + sizes[1]) // 2
