"""Iceberg field ids written into the footer of a Parquet file encoded without them.

Iceberg readers resolve Parquet columns by each schema element's ``field_id`` (spec, Appendix A), so
every column of a data file needs one. cuDF's Parquet writer can set them in libcudf
(``column_in_metadata::set_parquet_field_id``), but its Python bindings (pylibcudf 26.10's
``ColumnInMetadata``) do not expose that, so a file cuDF encodes gets its ids here: the footer's schema
elements (depth-first, as the format stores them) are matched by name to the Iceberg schema the file was
written with, top-down, each element given its field's id (a list's element and a map's key and value
theirs, in the 3-level layout of the spec: the repeated middle group has none), and the footer is encoded
again. Pages sit before the footer and are not touched. An element the schema does not name, or a
layout that is not the spec's, is a :class:`SchemaMismatch` naming the column.
"""

from __future__ import annotations

import struct

from ..errors import DataFileError, SchemaMismatch
from ..iceberg import types as it
from ..iceberg.schema import Schema
from .thrift_compact import I32, Struct, ThriftError, ThriftList, decode_struct, encode_struct

_MAGIC = b"PAR1"
_FMD_SCHEMA = 2  # FileMetaData.schema: list<SchemaElement>, depth-first
_SE_NAME, _SE_NUM_CHILDREN, _SE_FIELD_ID = 4, 5, 9


def with_field_ids(data: bytes, schema: Schema | it.StructType, *, path: str = "<in memory>") -> bytes:
    """``data`` (a whole Parquet file) with the field ids of ``schema`` set on its schema elements;
    ``path`` names the file in errors."""
    if len(data) < 12 or data[:4] != _MAGIC or data[-4:] != _MAGIC:
        raise DataFileError(f"{path}: not a Parquet file (no PAR1 magic at both ends)")
    (length,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - length
    if start < 4:
        raise DataFileError(f"{path}: footer length {length} runs past the start of the file")
    try:
        footer, used = decode_struct(memoryview(data)[start : len(data) - 8])
    except ThriftError as exc:
        raise DataFileError(f"{path}: unreadable Parquet footer: {exc}") from None
    if used != length:
        raise DataFileError(f"{path}: the footer takes {used} bytes, its length says {length}")
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
    return data[:start] + body + struct.pack("<I", len(body)) + _MAGIC


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
        return i + 1

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
