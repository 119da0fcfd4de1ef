"""The Arrow schema an append's ``merge_schema`` unions into the table's: the data's, with the table's
type for every primitive column the append already writes as it is (a checked cast: ns timestamps into a
``timestamp`` column, an all-null Arrow ``null`` column, a 16-byte fixed binary into ``uuid``, unsigned or
256-bit types whose values fit) where ``union_by_name`` would find no promotion; a merge then changes
nothing there, and a plain append and a merging one accept the same data. Promotions (``int64`` into an
``int`` column widens it to ``long``) are left to the union."""

from __future__ import annotations

import pyarrow as pa

from ..errors import InvalidType
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..io.arrow_conform import accepts, write_type
from .schema_from_arrow import arrow_type_to_iceberg


def merge_view(arrow: pa.Schema, schema: Schema, version: int) -> pa.Schema:
    """``arrow`` with the table's types where the append writes the data as it is (see the module doc)."""
    by_name = {f.name: f for f in schema.fields}
    return pa.schema([_field(f, by_name.get(f.name), version) for f in arrow], metadata=arrow.metadata)


def _field(f: pa.Field, column: it.NestedField | None, version: int) -> pa.Field:
    return f if column is None else f.with_type(_type(f.type, column.type, version, f.name))


def _type(at: pa.DataType, t: it.IcebergType, version: int, name: str) -> pa.DataType:
    while pa.types.is_dictionary(at):
        at = at.value_type
    if isinstance(t, it.StructType) and pa.types.is_struct(at):
        kids = {c.name: c for c in t.fields}
        return pa.struct([_field(c, kids.get(c.name), version) for c in at])
    if isinstance(t, it.ListType) and (
        pa.types.is_list(at) or pa.types.is_large_list(at) or pa.types.is_fixed_size_list(at)
    ):
        element = at.value_field
        return pa.list_(element.with_type(_type(element.type, t.element, version, f"{name}.element")))
    if isinstance(t, it.MapType) and pa.types.is_map(at):
        key, item = at.key_field, at.item_field
        return pa.map_(
            key.with_type(_type(key.type, t.key, version, f"{name}.key")),
            item.with_type(_type(item.type, t.value, version, f"{name}.value")),
        )
    if not isinstance(t, it.PrimitiveType):
        return at
    try:
        natural: it.IcebergType | None = arrow_type_to_iceberg(at, name)
    except InvalidType:
        natural = None
    if isinstance(natural, it.PrimitiveType) and (
        natural == t or it.can_promote(t, natural, version) or it.can_promote(natural, t, version)
    ):
        return at  # the union keeps the table's type or promotes it
    if pa.types.is_null(at) or (not isinstance(at, pa.BaseExtensionType) and accepts(t, at)):
        return write_type(t)
    return at
