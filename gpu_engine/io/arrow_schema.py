"""The Arrow form of Iceberg schemas: the one type mapping every scan output uses.

- primitives as :func:`gpu_engine.iceberg.types.to_arrow` maps them (strings ``large_string``, binary
  ``large_binary``, uuid ``binary(16)``, fixed ``binary(L)``, decimals ``decimal128(P, S)``);
- ``geometry``/``geography`` as WKB ``large_binary``; ``variant`` as the struct of its two binary parts
  (``metadata``, ``value``) as Parquet stores an unshredded variant;
- structs as ``struct``; lists as ``list`` with the child named ``element``; maps as ``map`` with
  children ``key`` and ``value``;
- a field is nullable exactly when it is optional; every field, element, key and value carries its
  field id as ``PARQUET:field_id`` metadata (so the schema also writes Iceberg-conformant Parquet).

It also builds the constant columns a scan fills in: ``initial-default`` values and partition values.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ..errors import SchemaMismatch
from ..iceberg import json_values
from ..iceberg import types as it
from ..iceberg.schema import Schema
from .arrow_nested import struct_array

Make = Callable[[int], pa.Array]  # number of rows -> constant column

FIELD_ID_KEY = b"PARQUET:field_id"

VARIANT_ARROW = pa.struct(
    [pa.field("metadata", pa.large_binary(), nullable=False), pa.field("value", pa.large_binary())]
)


def field_metadata(field_id: int) -> dict[bytes, bytes]:
    return {FIELD_ID_KEY: str(field_id).encode()}


def field_id_of(field: pa.Field) -> int | None:
    """The ``PARQUET:field_id`` of an Arrow field, or None when it has none (or it is not an integer)."""
    meta = field.metadata
    if not meta or FIELD_ID_KEY not in meta:
        return None
    try:
        return int(meta[FIELD_ID_KEY])
    except ValueError:
        return None


def to_arrow_type(t: it.IcebergType) -> pa.DataType:
    """The Arrow type of Iceberg type ``t`` (nested types with field ids on their children)."""
    if isinstance(t, it.StructType):
        return pa.struct([to_arrow_field(f) for f in t.fields])
    if isinstance(t, it.ListType):
        return pa.list_(_child("element", t.element_id, t.element, not t.element_required))
    if isinstance(t, it.MapType):
        key = _child("key", t.key_id, t.key, False)
        value = _child("value", t.value_id, t.value, not t.value_required)
        return pa.map_(key, value)
    if t == it.VARIANT:
        return VARIANT_ARROW
    if isinstance(t, (it.GeometryType, it.GeographyType)):
        return pa.large_binary()
    return it.to_arrow(t)


def _child(name: str, field_id: int, t: it.IcebergType, nullable: bool) -> pa.Field:
    return pa.field(name, to_arrow_type(t), nullable=nullable, metadata=field_metadata(field_id))


def to_arrow_field(f: it.NestedField) -> pa.Field:
    return _child(f.name, f.field_id, f.type, not f.required)


def to_arrow_schema(schema: Schema | it.StructType) -> pa.Schema:
    """The Arrow schema of an Iceberg schema (or struct): names are the Iceberg field names. Made once
    for equal schemas (a scan asks for its read schema's once per file)."""
    try:
        return _arrow_schema(schema)
    except TypeError:  # unhashable: a default value held as a list or dict
        return _make_arrow_schema(schema)


def _make_arrow_schema(schema: Schema | it.StructType) -> pa.Schema:
    return pa.schema([to_arrow_field(f) for f in schema.fields])


_arrow_schema = functools.lru_cache(maxsize=64)(_make_arrow_schema)


# -- constant columns: defaults and partition values ------------------------------------------------------


def constant_maker(t: it.IcebergType, value: Any) -> Make:
    """Columns of ``n`` rows holding physical ``value`` (as :mod:`~gpu_engine.iceberg.json_values` gives)."""
    target = to_arrow_type(t)
    if value is None:
        return lambda n: pa.nulls(n, target)
    scalar = pa.scalar(_arrow_value(t, value), target)
    return lambda n: pa.repeat(scalar, n)


def default_maker(f: it.NestedField, where: str, *, write: bool = False) -> Make:
    """Columns of ``f``'s ``initial-default`` (``write``: its ``write-default``; spec "Default values"): null
    when it has none, and for a struct default (``{}``) every field from the struct's values or else its
    own default of the same kind. A required field without a default is a :class:`SchemaMismatch` naming
    ``where``."""
    has, raw = (f.has_write_default, f.write_default) if write else (f.has_initial_default, f.initial_default)
    default = json_values.from_json(f.type, raw) if has else None
    if default is None:
        if f.required and f.type != it.UNKNOWN:
            kind = "write-default" if write else "initial-default"
            raise SchemaMismatch(
                f"{where}: required field {f.name!r} (field id {f.field_id}) is not in the "
                f"{'data' if write else 'file'} and has no {kind}"
            )
        return constant_maker(f.type, None)
    if not isinstance(f.type, it.StructType):
        return constant_maker(f.type, default)
    makers = [
        constant_maker(g.type, default[g.field_id])
        if g.field_id in default
        else default_maker(g, where, write=write)
        for g in f.type.fields
    ]
    fields = list(to_arrow_type(f.type))
    return lambda n: struct_array([m(n) for m in makers], fields, n)


def _arrow_value(t: it.IcebergType, value: Any) -> Any:
    """A physical Python value in the form ``pa.scalar`` takes (structs by name, UUIDs as bytes)."""
    if value is None:
        return None
    if isinstance(t, it.StructType):
        return {f.name: _arrow_value(f.type, value.get(f.field_id)) for f in t.fields}
    if isinstance(t, it.ListType):
        return [_arrow_value(t.element, v) for v in value]
    if isinstance(t, it.MapType):
        return [(_arrow_value(t.key, k), _arrow_value(t.value, v)) for k, v in value]
    return value.bytes if isinstance(value, uuid.UUID) else value
