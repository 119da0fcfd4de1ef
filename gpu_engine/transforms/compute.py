"""Each transform's kernel dispatch: a :class:`Column` on the host or the device in, one out.

The column's buffers decide where the kernels run; nothing here moves data or chooses a backend.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from ..backend.columns import Column, Layout
from ..errors import UnsupportedTransform
from ..iceberg import types as it
from ..kernels import bucket as kb
from ..kernels import temporal as kt
from ..kernels import truncate as ktr
from . import spec as ts

_UNITS = {"date": kt.DAYS, "timestamp_ns": kt.NANOS, "timestamptz_ns": kt.NANOS}


def compute(transform: ts.Transform, source: it.PrimitiveType, column: Column) -> Column:
    """``transform`` of every value of ``column`` (declared as Iceberg ``source``); nulls stay null."""
    if isinstance(transform, ts.Identity):
        return column
    if isinstance(transform, ts.Void):
        return _nulls_like(column)
    if isinstance(transform, ts.Bucket):
        return murmur3(source, column, transform.num_buckets)
    if isinstance(transform, ts.Truncate):
        return _truncate(source, column, transform.width)
    if isinstance(transform, ts.Temporal):
        out = kt.extract(transform.name, column.data, _UNITS.get(source.name, kt.MICROS))
        arrow_type = pa.date32() if isinstance(transform, ts.Day) else pa.int32()
        return replace(column, type=arrow_type, data=out, offsets=None)
    raise UnsupportedTransform(f"transform {transform} has no kernel")


def _nulls_like(column: Column) -> Column:
    from ..backend.columns import from_arrow

    nulls = from_arrow(pa.nulls(column.length, column.type))
    return nulls.to_device() if column.on_device else nulls


def _truncate(source: it.PrimitiveType, column: Column, width: int) -> Column:
    if source.name in ts.INTEGERS:
        return replace(column, data=ktr.truncate_integers(column.data, width))
    if source.name == "decimal":
        return replace(column, data=ktr.truncate_decimal128(column.data, width))
    cut = ktr.truncate_utf8 if source.name == "string" else ktr.truncate_binary
    data, offsets = cut(column.data, column.offsets, width)
    return replace(column, data=data, offsets=offsets)


def murmur3(source: it.PrimitiveType, column: Column, buckets: int = 0) -> Column:
    """Iceberg's 32-bit hash (``buckets=0``) or bucket number of every value, as an int32 column."""
    name, data, layout = source.name, column.data, column.layout
    if name in ts.NANOS:
        out = kb.hash_timestamp_nanos(data, buckets)
    elif layout is Layout.FIXED and name in {"float", "double"}:
        out = kb.hash_floats(data, buckets)
    elif layout is Layout.FIXED:
        out = kb.hash_longs(data, buckets)
    elif layout is Layout.WORDS128:
        out = kb.hash_decimal128(data, buckets)
    elif layout is Layout.VARLEN:
        out = kb.hash_binary(data, column.offsets, buckets)
    elif layout is Layout.FIXED_BYTES:
        out = kb.hash_fixed(data, column.fixed_width, column.length, buckets)
    elif layout is Layout.BITS:
        out = kb.hash_booleans(data, 0, column.length, buckets)
    else:
        raise UnsupportedTransform(f"no 32-bit hash is defined for source type {source}")
    return replace(column, type=pa.int32(), data=out, offsets=None)
