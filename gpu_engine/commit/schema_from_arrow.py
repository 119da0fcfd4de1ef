"""A new table's Iceberg schema from an Arrow schema, with fresh field ids.

Ids are assigned as Iceberg does for a new table: the fields of a struct first (1, 2, ...), then, field
by field, the ids inside each nested type (list element; map key and value; struct fields). A non-nullable
Arrow field is ``required``. Types: integers of up to 32 bits (and uint8/uint16) are ``int``, int64 and
uint32 ``long``; float16/float32 ``float``; ``string``/``large_string``/``string_view`` ``string``;
binaries ``binary``; ``fixed_size_binary(n)`` ``fixed[n]``; the ``arrow.uuid`` extension ``uuid``;
``timestamp`` of s/ms/us ``timestamp`` (``timestamptz`` with a time zone), of ns ``timestamp_ns``;
``time`` ``time``; ``date32``/``date64`` ``date``; ``decimal128`` ``decimal``; ``null`` ``unknown``;
dictionaries their value type. uint64 and other types are rejected (:class:`InvalidType`, naming the field).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ..errors import InvalidType
from ..iceberg import types as it
from ..iceberg.schema import Schema


def schema_from_arrow(schema: pa.Schema) -> Schema:
    """An Iceberg schema (id 0) for ``schema`` with fresh field ids."""
    counter = iter(range(1, 1 << 31))
    return Schema(_struct(list(schema), counter, "").fields, schema_id=0)


def arrow_type_to_iceberg(t: pa.DataType, name: str) -> it.IcebergType:
    """The Iceberg type of Arrow type ``t`` (nested ids numbered from 1: renumber them where they land);
    :class:`InvalidType` naming ``name`` when it has none."""
    return _type(t, iter(range(1, 1 << 31)), name)


def _struct(fields: list[pa.Field], ids: Iterator[int], where: str) -> it.StructType:
    assigned = [next(ids) for _ in fields]
    out = []
    for fid, f in zip(assigned, fields, strict=True):
        name = f"{where}{f.name}"
        out.append(it.NestedField(fid, f.name, _type(f.type, ids, name), required=not f.nullable))
    return it.StructType(tuple(out))


def _type(t: pa.DataType, ids: Iterator[int], name: str) -> it.IcebergType:
    if isinstance(t, pa.DictionaryType):
        return _type(t.value_type, ids, name)
    if pa.types.is_struct(t):
        return _struct(list(t), ids, name + ".")
    if pa.types.is_map(t):
        key_id, value_id = next(ids), next(ids)
        key = _type(t.key_type, ids, name + ".key")
        value = _type(t.item_type, ids, name + ".value")
        return it.MapType(key_id, key, value_id, value, value_required=not t.item_field.nullable)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        element_id = next(ids)
        element = _type(t.value_type, ids, name + ".element")
        return it.ListType(element_id, element, element_required=not t.value_field.nullable)
    return _primitive(t, name)


_SIMPLE: dict[pa.DataType, it.PrimitiveType] = {
    pa.bool_(): it.BOOLEAN,
    pa.int8(): it.INT, pa.int16(): it.INT, pa.int32(): it.INT, pa.uint8(): it.INT, pa.uint16(): it.INT,
    pa.int64(): it.LONG, pa.uint32(): it.LONG,
    pa.float16(): it.FLOAT, pa.float32(): it.FLOAT, pa.float64(): it.DOUBLE,
    pa.string(): it.STRING, pa.large_string(): it.STRING, pa.string_view(): it.STRING,
    pa.binary(): it.BINARY, pa.large_binary(): it.BINARY, pa.binary_view(): it.BINARY,
    pa.date32(): it.DATE, pa.date64(): it.DATE, pa.null(): it.UNKNOWN,
}  # fmt: skip


def _primitive(t: pa.DataType, name: str) -> it.PrimitiveType:
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.uuid":
            return it.UUID
        return _primitive(t.storage_type, name)
    if t in _SIMPLE:
        return _SIMPLE[t]
    if pa.types.is_timestamp(t):
        zoned = t.tz is not None
        if t.unit == "ns":
            return it.TIMESTAMPTZ_NS if zoned else it.TIMESTAMP_NS
        return it.TIMESTAMPTZ if zoned else it.TIMESTAMP
    if pa.types.is_time(t):
        return it.TIME
    if pa.types.is_decimal(t) and t.precision <= it.MAX_DECIMAL_PRECISION:
        return it.decimal(t.precision, t.scale)
    if pa.types.is_fixed_size_binary(t):
        return it.fixed(t.byte_width)
    raise InvalidType(f"column {name!r}: Arrow type {t} has no Iceberg type")
