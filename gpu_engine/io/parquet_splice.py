"""One Parquet file from row groups encoded independently (side by side, on several threads).

pyarrow encodes one file on one thread. To use every core on one output file, each row group is encoded
as a complete in-memory Parquet file of its own (:func:`encode_row_group`, no GIL held), and
:class:`SplicedFile` appends them in order to the real file: the magic, then each part's column chunks
(the bytes between its magic and its footer), then one footer: the first part's ``FileMetaData`` with
the row counts summed and every part's row groups, their absolute offsets (row group ``file_offset``,
column chunk ``file_offset`` when set, data/index/dictionary page offsets) moved by where the part's
bytes landed, and ordinals renumbered. Pages (and their CRCs) are copied byte for byte; the schema, the
key-value metadata (``ARROW:schema``) and the column orders are the same in every part, since every part
is written with the same schema and properties.

A row group's columns can be encoded side by side too (:func:`encode_columns`, one part per range of
top-level columns, :func:`column_ranges`): :func:`join_columns` makes them one part, the column chunks
of each range after the other's, in one row group whose totals are the parts' sums, under the footer
pyarrow writes for the whole schema (:func:`schema_footer`: its schema elements, column orders and
``ARROW:schema``).

Parts are kept as the byte strings pyarrow wrote (no growing buffer). Bloom filters lie in a part's body
(after its column chunks, before its footer) and move with it (``bloom_filter_offset`` shifted too).
Parts must not carry page indexes: they are refused with an error rather than spliced wrong. Footers are
read and written with the generic :mod:`.thrift_compact` codec, so fields added to the format later are
kept as written.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from .thrift_compact import STRUCT, EncodedStruct, Struct, ThriftList, Value, decode_struct, encode_struct

MAGIC = b"PAR1"

# FileMetaData / RowGroup / ColumnChunk / ColumnMetaData field ids (parquet.thrift)
_FMD_NUM_ROWS, _FMD_ROW_GROUPS = 3, 4
_FMD_COLUMN_ORDERS = 7
_RG_COLUMNS, _RG_TOTAL_BYTES, _RG_NUM_ROWS, _RG_SORTING = 1, 2, 3, 4
_RG_FILE_OFFSET, _RG_COMPRESSED, _RG_ORDINAL = 5, 6, 7
_CC_FILE_OFFSET, _CC_META, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX = 2, 3, 4, 6
# data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset
_CMD_OFFSETS = (9, 10, 11, 14)


class Sink(Protocol):
    """Where a spliced file goes: written in order."""

    def write(self, data: bytes | memoryview, /) -> int: ...


class SpliceError(ValueError):
    """A part that cannot be spliced (not Parquet, or carrying structures outside its column chunks)."""


class _Chunks:
    """A write-only file object keeping what pyarrow writes as a list of bytes: the part's memory is its
    size (a growing buffer would reallocate, and briefly hold up to three times that)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        """Nothing to flush: every write is kept as it comes."""

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class EncodedPart:
    """One Parquet file in memory: its bytes (as written, in chunks) and its decoded footer."""

    chunks: tuple[bytes | memoryview, ...]
    body_end: int  # where the footer starts: the column chunks are bytes 4 .. body_end
    footer: Struct  # FileMetaData
    num_rows: int

    @property
    def body_size(self) -> int:
        """Bytes of its column chunks: what appending it adds to a file."""
        return self.body_end - len(MAGIC)

    @property
    def row_groups(self) -> list[Any]:
        groups = self.footer.get(_FMD_ROW_GROUPS)
        return groups.items if isinstance(groups, ThriftList) else []

    def body(self) -> Iterator[memoryview]:
        """The column chunk bytes, as slices of the chunks."""
        pos = 0
        for chunk in self.chunks:
            lo, hi = max(len(MAGIC), pos), min(self.body_end, pos + len(chunk))
            if lo < hi:
                yield memoryview(chunk)[lo - pos : hi - pos]
            pos += len(chunk)


def encode_row_group(table: pa.Table, schema: pa.Schema, writer_options: dict[str, Any]) -> EncodedPart:
    """``table`` as one row group of a Parquet file in memory, written with ``writer_options``
    (:class:`pyarrow.parquet.ParquetWriter` keyword arguments)."""
    sink = _Chunks()
    with pq.ParquetWriter(sink, schema, **writer_options) as writer:
        writer.write_table(table, row_group_size=max(table.num_rows, 1))
    return parse_part(sink.chunks)


def encode_columns(
    table: pa.Table, schema: pa.Schema, writer_options: dict[str, Any], names: Sequence[str]
) -> EncodedPart:
    """The top-level columns ``names`` of ``table`` as one row group (:func:`encode_row_group`), with
    the options that name their leaves only (``use_dictionary`` lists, ``bloom_filter_options``)."""
    fields = [schema.field(name) for name in names]
    leaves = {path for f in fields for path, _ in leaf_paths(f)}  # by field: a name may hold dots
    options = dict(writer_options)
    for key in ("use_dictionary", "bloom_filter_options"):
        value = options.get(key)
        if isinstance(value, (list, dict)):
            kept = [path for path in value if path in leaves]
            options[key] = kept if isinstance(value, list) else {path: value[path] for path in kept}
    return encode_row_group(table.select(list(names)), pa.schema(fields, metadata=schema.metadata), options)


def leaf_paths(f: pa.Field, prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    """(``path_in_schema``, leaf field) of the Parquet columns pyarrow writes for the field ``f`` (with its
    default ``use_compliant_nested_type``: a list's element is named ``element`` whatever its Arrow name)."""
    path = f"{prefix}{f.name}"
    t = f.type
    if pa.types.is_struct(t):
        for child in t:
            yield from leaf_paths(child, path + ".")
    elif pa.types.is_map(t):
        yield from leaf_paths(t.key_field, path + ".key_value.")
        yield from leaf_paths(t.item_field, path + ".key_value.")
    elif pa.types.is_list(t):
        yield from leaf_paths(t.value_field.with_name("element"), path + ".list.")
    else:
        yield path, f


def column_ranges(table: pa.Table, parts: int) -> list[list[str]]:
    """``table``'s top-level columns cut into at most ``parts`` consecutive ranges of about equal Arrow
    bytes (every range at least one column)."""
    names, sizes = table.column_names, [c.nbytes for c in table.columns]
    parts = max(1, min(parts, len(names)))
    total = sum(sizes)
    ranges: list[list[str]] = [[]]
    done = 0
    for i, (name, size) in enumerate(zip(names, sizes, strict=True)):
        left_cols, left_parts = len(names) - i, parts - len(ranges)
        if ranges[-1] and left_parts > 0 and (left_cols <= left_parts or done >= total * len(ranges) / parts):
            ranges.append([])
        ranges[-1].append(name)
        done += size
    return ranges


def schema_footer(schema: pa.Schema, writer_options: dict[str, Any]) -> Struct:
    """The ``FileMetaData`` pyarrow writes for ``schema`` with ``writer_options`` (no rows)."""
    return encode_row_group(schema.empty_table(), schema, writer_options).footer


def join_columns(parts: Sequence[EncodedPart], footer: Struct) -> EncodedPart:
    """One part from ``parts`` holding the same rows' consecutive column ranges (one row group each, in
    the schema's column order), under ``footer`` (:func:`schema_footer` of the whole schema)."""
    groups: list[Struct] = []
    for part in parts:
        if len(part.row_groups) != 1:
            raise SpliceError(f"a column range with {len(part.row_groups)} row groups (expected one)")
        groups.append(part.row_groups[0])
    rows = {g.get(_RG_NUM_ROWS) for g in groups}
    if len(rows) != 1 or any(g.get(_RG_SORTING) is not None for g in groups):
        raise SpliceError("column ranges of different row counts, or with sorting columns, cannot be joined")
    body: list[bytes | memoryview] = [MAGIC]
    columns: list[Value] = []
    offset = len(MAGIC)
    for part, group in zip(parts, groups, strict=True):
        group = copy.deepcopy(group)
        _shift_group(group, offset - len(MAGIC))
        columns.extend(_columns(group))
        body.extend(part.body())
        offset += part.body_end - len(MAGIC)
    orders = footer.get(_FMD_COLUMN_ORDERS)
    if isinstance(orders, ThriftList) and len(orders.items) != len(columns):
        raise SpliceError(f"{len(columns)} column chunks joined for a schema of {len(orders.items)} columns")
    group = copy.deepcopy(groups[0])
    group.set(_RG_COLUMNS, ThriftList(STRUCT, columns))
    for fid in (_RG_TOTAL_BYTES, _RG_COMPRESSED):
        values = [g.get(fid) for g in groups]
        if all(isinstance(v, int) for v in values):
            group.set(fid, sum(v for v in values if isinstance(v, int)))
    joined = Struct([list(f) for f in footer.fields])
    joined.set(_FMD_NUM_ROWS, parts[0].num_rows)
    joined.set(_FMD_ROW_GROUPS, ThriftList(STRUCT, [group]))
    data = encode_struct(joined)
    body.append(data + struct.pack("<I", len(data)) + MAGIC)
    return EncodedPart(tuple(body), offset, joined, parts[0].num_rows)


def parse_part(chunks: Sequence[bytes]) -> EncodedPart:
    """Split a whole Parquet file, given as consecutive chunks of bytes, into its column chunk bytes and
    its footer."""
    chunks = tuple(chunks)
    n = sum(len(c) for c in chunks)
    end = _tail(chunks, 8)
    if n < 12 or _head(chunks, 4) != MAGIC or end[4:] != MAGIC:
        raise SpliceError("not a Parquet file (magic missing)")
    (length,) = struct.unpack("<I", end[:4])
    start = n - 8 - length
    if start < 4:
        raise SpliceError(f"footer length {length} beyond the file ({n} bytes)")
    footer, used = decode_struct(_tail(chunks, length + 8)[:length])
    if used != length:
        raise SpliceError(f"footer of {used} bytes where its length says {length}")
    rows = footer.get(_FMD_NUM_ROWS)
    part = EncodedPart(chunks, start, footer, rows if isinstance(rows, int) else 0)
    for rg in part.row_groups:
        for cc in _columns(rg):
            if cc.get(_CC_OFFSET_INDEX) is not None or cc.get(_CC_COLUMN_INDEX) is not None:
                raise SpliceError("a part with page indexes cannot be spliced (write_page_index must be off)")
    return part


def _head(chunks: tuple[bytes | memoryview, ...], n: int) -> bytes:
    """The first ``n`` bytes of the chunks."""
    out = b""
    for chunk in chunks:
        if len(out) >= n:
            break
        out += bytes(chunk[: n - len(out)])
    return out


def _tail(chunks: tuple[bytes | memoryview, ...], n: int) -> bytes:
    """The last ``n`` bytes of the chunks."""
    out: list[bytes] = []
    left = n
    for chunk in reversed(chunks):
        if left <= 0:
            break
        out.append(bytes(chunk[-left:] if len(chunk) > left else chunk))
        left -= len(chunk)
    return b"".join(reversed(out))


def _columns(rg: Struct) -> list[Struct]:
    cols = rg.get(_RG_COLUMNS)
    return [c for c in cols.items if isinstance(c, Struct)] if isinstance(cols, ThriftList) else []


def _shift_group(rg: Struct, by: int) -> None:
    """Move every absolute offset of row group ``rg`` by ``by`` bytes."""
    _shift(rg, _RG_FILE_OFFSET, by)
    for cc in _columns(rg):
        _shift(cc, _CC_FILE_OFFSET, by, keep_zero=True)
        meta = cc.get(_CC_META)
        if isinstance(meta, Struct):
            for fid in _CMD_OFFSETS:
                _shift(meta, fid, by)


def _placed(rg: Struct, by: int, ordinal: int) -> Struct:
    """A copy of row group ``rg`` moved by ``by`` bytes, its ordinal (where it has one) ``ordinal``."""
    rg = copy.deepcopy(rg)
    _shift_group(rg, by)
    if rg.get(_RG_ORDINAL) is not None:
        rg.set(_RG_ORDINAL, ordinal)
    return rg


def _shift(s: Struct, fid: int, by: int, *, keep_zero: bool = False) -> None:
    value = s.get(fid)
    if isinstance(value, int) and not (keep_zero and value == 0):
        s.set(fid, value + by)


class SpliceFile:
    """Parts appended in order to ``handle`` (positioned at 0, opened for writing): :meth:`close`
    writes the footer and returns it as pyarrow reads it back."""

    def __init__(self, handle: Sink):
        self.handle = handle
        handle.write(MAGIC)
        self.offset = len(MAGIC)  # where the next part's body goes
        self.first: Struct | None = None
        # the row groups as encoded for the footer: a file of thousands of small row groups (a compaction
        # into many partitions) holds them in a few hundred bytes each, not as trees of objects
        self.row_groups: list[EncodedStruct] = []
        self.num_rows = 0

    def append(self, part: EncodedPart) -> int:
        """Write ``part``'s column chunks; returns the bytes written."""
        shift = self.offset - len(MAGIC)  # in the part, the body starts after its magic
        for rg in part.row_groups:
            self.row_groups.append(EncodedStruct(encode_struct(_placed(rg, shift, len(self.row_groups)))))
        size = part.body_size
        for piece in part.body():
            self.handle.write(piece)
        self.offset += size
        self.num_rows += part.num_rows
        if self.first is None:
            self.first = part.footer
        return size

    def tell(self) -> int:
        return self.offset

    def close(self) -> None:
        """Write the merged footer (at least one part must have been appended: it gives the schema)."""
        if self.first is None:
            raise SpliceError("no part appended: the file has no schema")
        footer = Struct([list(f) for f in self.first.fields])
        footer.set(_FMD_NUM_ROWS, self.num_rows)
        footer.set(_FMD_ROW_GROUPS, ThriftList(STRUCT, list(self.row_groups)))
        data = encode_struct(footer)
        self.handle.write(data)
        self.handle.write(struct.pack("<I", len(data)))
        self.handle.write(MAGIC)
        self.offset += len(data) + 8


__all__ = [
    "EncodedPart",
    "SpliceError",
    "SpliceFile",
    "column_ranges",
    "encode_columns",
    "encode_row_group",
    "join_columns",
    "leaf_paths",
    "parse_part",
    "schema_footer",
]
