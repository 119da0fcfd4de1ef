"""Physical literal values to Arrow arrays and scalars of an Iceberg type's Arrow mapping, and back."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..iceberg import types as it


def arrow_type(t: it.PrimitiveType) -> pa.DataType:
    """The Arrow type literals of ``t`` take (strings and binaries in their regular, not large, form)."""
    if t.name == "string":
        return pa.string()
    if t.name == "binary":
        return pa.binary()
    if isinstance(t, it.DecimalType):  # truncate may carry a value past the precision (as in Java)
        return pa.decimal128(it.MAX_DECIMAL_PRECISION, t.scale)
    return it.to_arrow(t)


def _arrow_value(value: Any) -> Any:
    return value.bytes if isinstance(value, uuid.UUID) else value


def array(values: Sequence[Any], t: it.PrimitiveType) -> pa.Array:
    return pa.array([_arrow_value(v) for v in values], type=arrow_type(t))


def scalar(value: Any, t: it.PrimitiveType) -> pa.Scalar:
    return pa.scalar(_arrow_value(value), type=arrow_type(t))


def physical(values: pa.Array, t: it.PrimitiveType) -> list[Any]:
    """Arrow values of Iceberg type ``t`` as physical Python values (days, micros, Decimal, UUID...)."""
    if pa.types.is_date(values.type):
        values = values.cast(pa.int32())
    elif pa.types.is_timestamp(values.type) or pa.types.is_time(values.type):
        values = values.cast(pa.int64())
    out: list[Any] = values.to_pylist()
    if t.name == "uuid":
        return [None if v is None else uuid.UUID(bytes=v) for v in out]
    return out
