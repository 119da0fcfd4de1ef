"""The Iceberg schema written into the footer of a Parquet file another encoder wrote (cuDF's).

Iceberg readers resolve Parquet columns by each schema element's ``field_id`` (spec, Appendix A), so
every column of a data file needs one. cuDF's Parquet writer can set them in libcudf
(``column_in_metadata::set_parquet_field_id``), but its Python bindings (pylibcudf 26.10's
``ColumnInMetadata``) do not expose that, so a file cuDF encodes gets its ids here: the footer's schema
elements (depth-first, as the format stores them) are matched by name to the Iceberg schema the file was
written with, top-down, each element given its field's id (a list's element and a map's key and value
theirs, in the 3-level layout of the spec: the repeated middle group has none), and the footer is encoded
again. Pages sit before the footer and are not touched. An element the schema does not name, or a
layout that is not the spec's, is a :class:`SchemaMismatch` naming the column.

Two annotations are set from the Iceberg type as well, where cuDF cannot write them per column: a
timestamp's ``isAdjustedToUTC`` (cuDF writes one setting for every timestamp column of a file: true for
``timestamptz``, false for ``timestamp``, whose legacy ``TIMESTAMP_*`` converted type, meaning UTC, is
dropped) and ``DATE`` on a ``date`` column (cuDF has no date type: the days go as INT32, annotated here).
Any other primitive keeps what the encoder wrote.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from ..errors import DataFileError, SchemaMismatch
from ..iceberg import types as it
from ..iceberg.schema import Schema
from .thrift_compact import (
    BOOL_FALSE,
    BOOL_TRUE,
    I32,
    STRUCT,
    Struct,
    ThriftError,
    ThriftList,
    decode_struct,
    encode_struct,
)

_MAGIC = b"PAR1"
_FMD_SCHEMA = 2  # FileMetaData.schema: list<SchemaElement>, depth-first
_SE_TYPE, _SE_NAME, _SE_NUM_CHILDREN, _SE_CONVERTED, _SE_FIELD_ID, _SE_LOGICAL = 1, 4, 5, 6, 9, 10
_INT32 = 1  # Type.INT32
_CT_DATE, _UTC_CONVERTED = 6, (9, 10)  # ConvertedType DATE; TIMESTAMP_MILLIS, TIMESTAMP_MICROS
_LT_DATE, _LT_TIMESTAMP = 6, 8  # LogicalType's DATE and TIMESTAMP members
_TS_ADJUSTED = 1  # TimestampType.isAdjustedToUTC


def with_iceberg_schema(data: bytes, schema: Schema | it.StructType, *, path: str = "<in memory>") -> bytes:
    """``data`` (a whole Parquet file) with the field ids and annotations of ``schema`` set on its schema
    elements (see the module doc); ``path`` names the file in errors."""
    if len(data) < 12 or data[:4] != _MAGIC:
        raise DataFileError(f"{path}: not a Parquet file (no PAR1 magic at both ends)")
    start, footer = _read_footer(data[-8:], lambda offset, n: data[offset : offset + n], len(data), path)
    return data[:start] + _conformed(footer, schema, path)


def conform_file(path: str, schema: Schema | it.StructType) -> None:
    """:func:`with_iceberg_schema` for the local file ``path``, in place: only its footer is rewritten
    (for a file being written, not yet published)."""
    with open(path, "r+b") as f:
        size = f.seek(0, 2)
        if size < 12:
            raise DataFileError(f"{path}: not a Parquet file (no PAR1 magic at both ends)")

        def read(offset: int, n: int) -> bytes:
            f.seek(offset)
            return f.read(n)

        if read(0, 4) != _MAGIC:
            raise DataFileError(f"{path}: not a Parquet file (no PAR1 magic at both ends)")
        start, footer = _read_footer(read(size - 8, 8), read, size, path)
        f.seek(start)
        f.write(_conformed(footer, schema, path))
        f.truncate()


def _read_footer(tail: bytes, read: Callable[[int, int], bytes], size: int, path: str) -> tuple[int, Struct]:
    """The footer's offset and decoded struct, from the file's last 8 bytes and a reader of ranges."""
    if tail[4:] != _MAGIC:
        raise DataFileError(f"{path}: not a Parquet file (no PAR1 magic at both ends)")
    (length,) = struct.unpack("<I", tail[:4])
    start = size - 8 - length
    if start < 4:
        raise DataFileError(f"{path}: footer length {length} runs past the start of the file")
    try:
        footer, used = decode_struct(read(start, length))
    except ThriftError as exc:
        raise DataFileError(f"{path}: unreadable Parquet footer: {exc}") from None
    if used != length:
        raise DataFileError(f"{path}: the footer takes {used} bytes, its length says {length}")
    return start, footer


def _conformed(footer: Struct, schema: Schema | it.StructType, path: str) -> bytes:
    """The footer with ``schema`` set on its elements, encoded, with its length and the magic."""
    elements = footer.get(_FMD_SCHEMA)
    if not isinstance(elements, ThriftList) or not elements.items:
        raise DataFileError(f"{path}: the footer has no schema")
    items = [e for e in elements.items if isinstance(e, Struct)]
    end = _Ids(items, path).group(0, list(schema.fields), "")
    if end != len(items):
        raise DataFileError(
            f"{path}: the footer's schema has {len(items) - end} element(s) after its columns"
        )
    body = encode_struct(footer)
    return body + struct.pack("<I", len(body)) + _MAGIC


class _Ids:
    def __init__(self, elements: list[Struct], path: str):
        self.elements = elements
        self.path = path

    def _name(self, i: int) -> str:
        name = self.elements[i].get(_SE_NAME)
        return name.decode() if isinstance(name, bytes) else ""

    def _children(self, i: int) -> int:
        n = self.elements[i].get(_SE_NUM_CHILDREN)
        return n if isinstance(n, int) else 0

    def _element(self, i: int, where: str) -> Struct:
        if i >= len(self.elements):
            raise SchemaMismatch(f"{self.path}: the footer's schema ends inside column {where!r}")
        return self.elements[i]

    def group(self, i: int, fields: list[it.NestedField], where: str) -> int:
        """Give the children of group element ``i`` the ids of ``fields`` (by name); the index after the
        group's last descendant."""
        self._element(i, where or "<root>")
        by_name = {f.name: f for f in fields}
        j = i + 1
        for _ in range(self._children(i)):
            self._element(j, where or "<root>")
            name = self._name(j)
            f = by_name.get(name)
            if f is None:
                raise SchemaMismatch(f"{self.path}: column {where + name!r} is not in the table schema")
            j = self.field(j, f.field_id, f.type, where + name)
        return j

    def field(self, i: int, field_id: int, t: it.IcebergType, where: str) -> int:
        """Set ``field_id`` on element ``i`` and its descendants' ids by ``t``; the index after it."""
        self.elements[i].put(_SE_FIELD_ID, I32, field_id)
        n = self._children(i)
        if isinstance(t, it.StructType):
            return self.group(i, list(t.fields), where + ".")
        if isinstance(t, it.ListType):
            return self._repeated(i, n, [(t.element_id, t.element)], where)
        if isinstance(t, it.MapType):
            return self._repeated(i, n, [(t.key_id, t.key), (t.value_id, t.value)], where)
        if n:
            raise SchemaMismatch(f"{self.path}: column {where!r} is a group, the table's field is {t}")
        if isinstance(t, it.PrimitiveType):
            self._annotate(self.elements[i], t, where)
        return i + 1

    def _annotate(self, element: Struct, t: it.PrimitiveType, where: str) -> None:
        """The annotations of ``t`` cuDF cannot write per column (see the module doc)."""
        logical = element.get(_SE_LOGICAL)
        if t.name in it.TIMESTAMP_NAMES:
            stamp = logical.get(_LT_TIMESTAMP) if isinstance(logical, Struct) else None
            if not isinstance(stamp, Struct):
                raise SchemaMismatch(f"{self.path}: column {where!r} is not a timestamp, the table's is {t}")
            adjusted = t.name in it.ZONED_TIMESTAMP_NAMES
            stamp.put(_TS_ADJUSTED, BOOL_TRUE if adjusted else BOOL_FALSE, adjusted)
            if not adjusted and element.get(_SE_CONVERTED) in _UTC_CONVERTED:
                element.fields = [f for f in element.fields if f[0] != _SE_CONVERTED]
        elif t == it.DATE:
            if element.get(_SE_TYPE) != _INT32:
                raise SchemaMismatch(f"{self.path}: column {where!r} is not stored as INT32, a date must be")
            element.put(_SE_CONVERTED, I32, _CT_DATE)
            element.put(_SE_LOGICAL, STRUCT, Struct([[_LT_DATE, STRUCT, Struct()]]))

    def _repeated(self, i: int, n: int, children: list[tuple[int, it.IcebergType]], where: str) -> int:
        """A list or map: one repeated group holding the element (or the key and the value), in order."""
        middle = i + 1
        if n != 1 or self._children(self._check(middle, where)) != len(children):
            raise SchemaMismatch(
                f"{self.path}: column {where!r} is not laid out as the spec's 3-level list or map"
            )
        j = middle + 1
        for field_id, t in children:
            self._element(j, where)
            j = self.field(j, field_id, t, f"{where}.{self._name(j)}")
        return j

    def _check(self, i: int, where: str) -> int:
        self._element(i, where)
        return i
