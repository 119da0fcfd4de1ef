"""A column default given in Python (``add_column(..., default=)``, v3's ``initial-default`` and
``write-default``) as the spec's JSON single value: exact for temporal types (to the nanosecond), refused
with the column named where the value is not of the column's type."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ExpressionError, SingleValueError
from ..expressions import exact_value
from ..iceberg import types as it
from ..iceberg.json_values import from_json, to_json
from .schema_changes import InvalidSchemaChange

__all__ = ["default_json"]

_TEMPORAL = frozenset({"date", "time", *it.TIMESTAMP_NAMES})
_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def _temporal_text(value: Any) -> Any:
    """A numpy datetime64 or a valid Arrow date/time/timestamp scalar as its exact ISO text (what
    :func:`~gpu_engine.expressions.exact_value` takes, to the nanosecond); other values as they are."""
    if isinstance(value, np.datetime64):
        return str(np.datetime_as_string(value))
    if not isinstance(value, pa.Scalar) or not value.is_valid or not pa.types.is_temporal(value.type):
        return value
    raw = value.cast(pa.int64()) if not pa.types.is_date32(value.type) else value.cast(pa.int32())
    n, at = int(raw.as_py()), value.type
    if pa.types.is_timestamp(at):
        return str(np.datetime_as_string(np.datetime64(n, at.unit))) + ("+00:00" if at.tz else "")
    if pa.types.is_date(at):
        return str(np.datetime_as_string(np.datetime64(n, "D" if pa.types.is_date32(at) else "ms")))
    if pa.types.is_time(at):
        seconds, nanos = divmod(n * _NANOS[at.unit], 10**9)
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{nanos:09d}"
    return value


def default_json(t: it.IcebergType, value: Any, where: str) -> Any:
    """The JSON single-value form of the Python ``value`` as a default of type ``t``."""
    if not isinstance(t, it.PrimitiveType):
        raise InvalidSchemaChange(f"{where}: defaults are supported for primitive columns only, not {t}")
    if isinstance(value, str) and t.name in _TEMPORAL:  # the spec's JSON form ("2024-01-01T12:00:00")
        try:
            encoded = to_json(t, from_json(t, value))
        except (SingleValueError, TypeError, ValueError) as exc:
            raise InvalidSchemaChange(f"{where}: default {value!r} is not a {t}: {exc}") from None
        return encoded
    if (
        isinstance(value, dt.datetime)
        and t.name in ("timestamp", "timestamp_ns")
        and value.tzinfo is not None
    ):
        raise InvalidSchemaChange(  # pyarrow would move it to UTC: its wall clock is the value
            f"{where}: default {value!r} has a time zone; a {t} column (without zone) takes a naive datetime"
        )
    if t.name in _TEMPORAL:  # exactly, or refused (pyarrow would drop a pandas Timestamp's nanoseconds)
        try:
            return to_json(t, exact_value(_temporal_text(value), t, f"{where}: default"))
        except ExpressionError as exc:
            raise InvalidSchemaChange(str(exc)) from None
    if t.name == "uuid" and isinstance(value, str):
        try:
            value = uuid.UUID(value)
        except ValueError as exc:
            raise InvalidSchemaChange(f"{where}: default {value!r} is not a {t}: {exc}") from None
    try:
        scalar = pa.scalar(value, type=it.to_arrow(t))
        physical = scalar.value if isinstance(scalar, pa.ExtensionScalar) else scalar
        if pa.types.is_temporal(physical.type):  # days, or time units since midnight / the epoch
            raw = physical.cast(pa.int32() if pa.types.is_date32(physical.type) else pa.int64()).as_py()
        else:
            raw = physical.as_py()
        encoded = to_json(t, raw)
        from_json(t, encoded)
    except (pa.ArrowException, SingleValueError, TypeError, ValueError) as exc:
        raise InvalidSchemaChange(f"{where}: default {value!r} is not a {t}: {exc}") from None
    return encoded
