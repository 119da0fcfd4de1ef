"""Reading one Parquet column (as pyarrow decoded it) as an Iceberg primitive type.

:func:`converter` decides once per file column whether the column can be read as the Iceberg type and
returns the conversion; it raises :class:`SchemaMismatch` naming the file, column and both types when not.
Conversions never lose information silently: a value that does not fit raises :class:`DataFileError`.

Accepted, besides the exact Arrow type of the Iceberg type (:func:`arrow_schema.to_arrow_type`):

- Iceberg promotions: int -> long, float -> double, decimal(P, S) -> decimal(P', S) with P' >= P,
  date -> timestamp / timestamp_ns (v3; out-of-range values fail);
- legacy physical forms: INT8/INT16 and UINT8/16/32 integers (UINT32 to int and UINT64 to long only
  where every value fits), FLOAT16, TIME_MILLIS, TIMESTAMP_MILLIS/NANOS (nanoseconds floor to micros),
  INT96 timestamps (checked against a second decoding in seconds: pyarrow wraps far dates silently),
  decimals stored as INT32/INT64/FIXED/BINARY (any Arrow decimal width), UUID as fixed[16] or the
  ``arrow.uuid`` extension, unannotated BINARY as string, dictionary-encoded columns;
- timestamps with and without ``isAdjustedToUTC`` read as either timestamp or timestamptz: both store
  the same count from the epoch, and Iceberg Java reads them the same way;
- an all-null column (Parquet ``UNKNOWN``/null logical type) as any type.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DataFileError, SchemaMismatch
from ..iceberg import types as it
from ..iceberg.serde import decimal_of
from .arrow_schema import to_arrow_type

Convert = Callable[[pa.Array, pa.Array | None], pa.Array]
"""(column, INT96 companion decoded in seconds or None) -> column of the Iceberg type's Arrow type"""

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_US_PER_DAY = 86_400_000_000
_SIGNED = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


def storage_type(t: pa.DataType) -> pa.DataType:
    """The type pyarrow's values are stored as: extension storage, dictionary value type."""
    while True:
        if isinstance(t, pa.BaseExtensionType):
            t = t.storage_type
        elif pa.types.is_dictionary(t):
            t = t.value_type
        else:
            return t


def plain(arr: pa.Array) -> pa.Array:
    """``arr`` without extension wrapper or dictionary encoding."""
    while True:
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        elif isinstance(arr, pa.DictionaryArray):
            arr = arr.dictionary_decode()
        else:
            return arr


def _is_stringlike(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binarylike(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


def converter(file_type: pa.DataType, t: it.PrimitiveType, where: str, *, int96: bool = False) -> Convert:
    """The conversion of a file column of Arrow type ``file_type`` to Iceberg type ``t``.

    ``where`` names the file, column and field id for messages; ``int96``: the column is stored as INT96.
    """
    ft = storage_type(file_type)
    target = to_arrow_type(t)
    conv = _choose(ft, t, target, where, int96)
    if conv is None:
        raise SchemaMismatch(f"{where}: file column of type {file_type} cannot be read as Iceberg {t}")

    def run(arr: pa.Array, seconds: pa.Array | None) -> pa.Array:
        try:
            return conv(plain(arr), seconds)
        except (pa.ArrowException, OverflowError) as exc:
            raise DataFileError(f"{where}: values cannot be read as Iceberg {t}: {exc}") from None

    return run


def _cast(target: pa.DataType) -> Convert:
    return lambda arr, _: arr if arr.type == target else arr.cast(target)


def _choose(
    ft: pa.DataType, t: it.PrimitiveType, target: pa.DataType, where: str, int96: bool
) -> Convert | None:
    name = t.name
    if pa.types.is_null(ft):
        return lambda arr, _: pa.nulls(len(arr), target)
    if name.startswith("timestamp"):
        return _timestamp(ft, target, name, where, int96)
    if ft == target:
        return _cast(target)
    if name in ("int", "long"):
        return _integer(ft, target, where)
    if name in ("float", "double"):
        floats = (pa.float16(), pa.float32()) if name == "double" else (pa.float16(),)
        return _cast(target) if ft in floats else None
    if isinstance(t, it.DecimalType):
        ok = pa.types.is_decimal(ft) and ft.scale == t.scale and ft.precision <= t.precision
        return _cast(target) if ok else None
    if name == "date":
        return _cast(target) if pa.types.is_date(ft) else None
    if name == "time":
        return _time(ft, target)
    if name == "string":
        return _cast(target) if _is_stringlike(ft) or _is_binarylike(ft) else None
    if name in ("binary", "geometry", "geography"):
        ok = _is_stringlike(ft) or _is_binarylike(ft) or pa.types.is_fixed_size_binary(ft)
        return _cast(target) if ok else None
    # fixed[L] and uuid: fixed_size_binary of the same width only (ft == target above)
    return None


def _integer(ft: pa.DataType, target: pa.DataType, where: str) -> Convert | None:
    if not pa.types.is_integer(ft):
        return None
    if ft.bit_width < target.bit_width or (ft in _SIGNED and ft.bit_width == target.bit_width):
        return _cast(target)
    if pa.types.is_unsigned_integer(ft) and ft.bit_width == target.bit_width:
        return _checked_unsigned(target, where)
    return None


def _checked_unsigned(target: pa.DataType, where: str) -> Convert:
    def run(arr: pa.Array, _: pa.Array | None) -> pa.Array:
        try:
            return arr.cast(target)  # a safe cast fails on values beyond the signed range
        except pa.ArrowInvalid:
            top = pc.max(arr).as_py()
            raise DataFileError(f"{where}: unsigned value {top} does not fit Iceberg {target}") from None

    return run


def _time(ft: pa.DataType, target: pa.DataType) -> Convert | None:
    if not pa.types.is_time(ft):
        return None
    if ft.unit == "ns":
        return lambda arr, _: _floor_units(arr, 1000, target)
    return _cast(target)


def _timestamp(ft: pa.DataType, target: pa.DataType, name: str, where: str, int96: bool) -> Convert | None:
    if pa.types.is_date(ft):  # v3 promotion date -> timestamp[_ns]; never to timestamptz
        if name in it.ZONED_TIMESTAMP_NAMES:
            return None
        return _cast(target)  # a safe cast fails on out-of-range dates
    if not pa.types.is_timestamp(ft):
        return None
    unit, want = ft.unit, target.unit
    plain_target = pa.timestamp(unit, tz=target.tz)

    def run(arr: pa.Array, seconds: pa.Array | None) -> pa.Array:
        if int96:
            _check_int96(arr, seconds, where)
        arr = arr.view(plain_target) if arr.type != plain_target else arr
        if _PER_SECOND[unit] > _PER_SECOND[want]:
            return _floor_units(arr, _PER_SECOND[unit] // _PER_SECOND[want], target)
        return arr.cast(target)  # same unit, or a coarser one: safe cast fails on overflow

    return run


def _floor_units(arr: pa.Array, factor: int, target: pa.DataType) -> pa.Array:
    """Integer-backed ``arr`` divided by ``factor`` rounding toward negative infinity, as ``target``."""
    values = arr.view(pa.int64()) if arr.type.bit_width == 64 else arr.cast(pa.int64())
    raw = values.fill_null(0).to_numpy(zero_copy_only=False)
    mask = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    floored = pa.array(np.floor_divide(raw, factor), type=pa.int64(), mask=mask)
    return floored.cast(pa.int32()).view(target) if target.bit_width == 32 else floored.view(target)


def _check_int96(arr: pa.Array, seconds: pa.Array | None, where: str) -> None:
    """pyarrow wraps far INT96 timestamps into wrong values: compare with their decoding in seconds."""
    if seconds is None:
        raise DataFileError(f"{where}: INT96 timestamps need the seconds decoding to be checked")
    per = _PER_SECOND[arr.type.unit]
    values = arr.view(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    secs = plain(seconds).view(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    bad = np.floor_divide(values, per) != secs
    if bad.any():
        row = int(np.argmax(bad))
        raise DataFileError(
            f"{where}: INT96 timestamp in row {row} of the batch is outside the range pyarrow decodes "
            f"correctly ({secs[row]} s from the epoch)"
        )


# -- statistics --------------------------------------------------------------------------------------


def stats_value(raw: Any, file_type: pa.DataType, physical_type: str, t: it.PrimitiveType) -> Any:
    """A Parquet min/max (``Statistics.min_raw``: int, float, bool or bytes) as the Iceberg physical value
    of ``t`` for a column that :func:`converter` reads as ``t``; None where it cannot be used safely."""
    ft = storage_type(file_type)
    if raw is None or physical_type == "INT96" or pa.types.is_unsigned_integer(ft) or ft == pa.float16():
        return None
    name = t.name
    if isinstance(t, it.DecimalType):
        return _decimal_stat(raw, ft, t)
    if name in ("int", "long", "float", "double", "boolean", "date"):
        return raw if not isinstance(raw, bytes) else None
    if name in ("string",):
        return _utf8(raw)
    if name in ("binary", "uuid") or isinstance(t, it.FixedType):
        return raw if isinstance(raw, bytes) else None
    if name == "time" and pa.types.is_time(ft):
        return _rescale(raw, _PER_SECOND[ft.unit], _PER_SECOND["us"])
    if name.startswith("timestamp") and isinstance(raw, int):
        want = _PER_SECOND["ns" if name.endswith("_ns") else "us"]
        if pa.types.is_date(ft):
            return raw * (_US_PER_DAY // 1_000_000) * want
        if pa.types.is_timestamp(ft):
            return _rescale(raw, _PER_SECOND[ft.unit], want)
    return None


def _rescale(raw: Any, have: int, want: int) -> int | None:
    if not isinstance(raw, int) or isinstance(raw, bool):
        return None
    return raw * (want // have) if want >= have else raw // (have // want)


def _utf8(raw: Any) -> str | None:
    if not isinstance(raw, bytes):
        return raw if isinstance(raw, str) else None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # e.g. a truncated bound cut inside a character
        return None


def _decimal_stat(raw: Any, ft: pa.DataType, t: it.DecimalType) -> Decimal | None:
    if not pa.types.is_decimal(ft) or ft.scale != t.scale:
        return None
    if isinstance(raw, bytes):
        if not raw:
            return None
        unscaled = int.from_bytes(raw, "big", signed=True)
    elif isinstance(raw, int) and not isinstance(raw, bool):
        unscaled = raw
    else:
        return None
    return decimal_of(unscaled, t.scale)
