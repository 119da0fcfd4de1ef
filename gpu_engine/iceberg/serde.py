"""Binary single-value serialization (spec Appendix D), both directions, for every primitive type.

Python values are the Iceberg physical values, convenient for vectorised pruning:

==========================  ==================================================================
boolean                     ``bool`` (one byte; any non-zero byte reads as true)
int, long                   ``int`` (4 / 8 bytes little-endian)
float, double               ``float`` (4 / 8 bytes little-endian IEEE 754)
date                        ``int`` days from 1970-01-01
time                        ``int`` microseconds from midnight
timestamp, timestamptz      ``int`` microseconds from the epoch
timestamp_ns, timestamptz_ns ``int`` nanoseconds from the epoch
string                      ``str`` (UTF-8, no length)
uuid                        :class:`uuid.UUID` (16 bytes big-endian)
fixed[L], binary            ``bytes``
decimal(P, S)               :class:`decimal.Decimal` with exponent ``-S`` (minimum big-endian two's complement
                            of the unscaled value)
geometry, geography         bounds only: a point ``(x, y[, z[, m]])`` of floats, 8-byte little-endian doubles
variant                     bounds only: the serialized Variant bytes, kept opaque
==========================  ==================================================================

Reading a bound written before a type promotion ("Schema Evolution"): a 4-byte value for a ``long`` column
is an ``int``, for a ``double`` column a ``float``, and for a ``timestamp``/``timestamp_ns`` column a ``date``
(returned converted to the column's unit). Decimal bounds written under a narrower precision need nothing.
``fixed`` bounds may be shorter than ``L`` (writers truncate binary bounds); longer is an error.

:func:`decode_array` decodes a whole Arrow binary column (one column's bounds across many files) into an
Arrow array of the physical type, vectorised for the fixed-width types.
"""

from __future__ import annotations

import math
import struct
import uuid
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SingleValueError
from . import types as it

MICROS_PER_DAY = 86_400_000_000
NANOS_PER_DAY = 86_400_000_000_000

# name -> (struct format, byte length) of the fixed-width little-endian types
_FIXED_WIDTH: dict[str, tuple[str, int]] = {
    "int": ("<i", 4),
    "long": ("<q", 8),
    "float": ("<f", 4),
    "double": ("<d", 8),
    "date": ("<i", 4),
    "time": ("<q", 8),
    "timestamp": ("<q", 8),
    "timestamptz": ("<q", 8),
    "timestamp_ns": ("<q", 8),
    "timestamptz_ns": ("<q", 8),
}
# name -> (promoted-from format, length, multiplier applied to the old value) per "Schema Evolution"
_PROMOTED: dict[str, tuple[str, int, int]] = {
    "long": ("<i", 4, 1),
    "double": ("<f", 4, 1),
    "timestamp": ("<i", 4, MICROS_PER_DAY),
    "timestamptz": ("<i", 4, MICROS_PER_DAY),  # not a valid promotion, but harmless to read
    "timestamp_ns": ("<i", 4, NANOS_PER_DAY),
    "timestamptz_ns": ("<i", 4, NANOS_PER_DAY),
}
_GEO_LENGTHS = (16, 24, 32)


def _fail(t: it.PrimitiveType, data: bytes | None, why: str) -> SingleValueError:
    size = f" ({len(data)} bytes)" if data is not None else ""
    return SingleValueError(f"Iceberg {t} single value{size}: {why}")


def _is_geo(t: it.PrimitiveType) -> bool:
    return isinstance(t, (it.GeometryType, it.GeographyType))


def from_bytes(t: it.PrimitiveType, data: bytes) -> Any:
    """Decode one Appendix D binary value of type ``t`` (see the module doc for the Python forms)."""
    data = bytes(data)
    name = t.name
    n = len(data)
    if name in _FIXED_WIDTH:
        fmt, width = _FIXED_WIDTH[name]
        if n == width:
            return struct.unpack(fmt, data)[0]
        if name in _PROMOTED and n == _PROMOTED[name][1]:
            old_fmt, _, scale = _PROMOTED[name]
            value = struct.unpack(old_fmt, data)[0]
            return value * scale if scale != 1 else value
        allowed = [width] + ([_PROMOTED[name][1]] if name in _PROMOTED else [])
        raise _fail(t, data, f"expected {' or '.join(map(str, sorted(allowed)))} bytes")
    if name == "boolean":
        if n != 1:
            raise _fail(t, data, "expected 1 byte")
        return data != b"\x00"
    if name == "string":
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(t, data, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    if name == "binary":
        return data
    if isinstance(t, it.FixedType):
        if n > t.length:
            raise _fail(t, data, f"longer than the fixed length {t.length}")
        return data
    if name == "uuid":
        if n != 16:
            raise _fail(t, data, "expected 16 bytes")
        return uuid.UUID(bytes=data)
    if isinstance(t, it.DecimalType):
        return _decimal_from_bytes(t, data)
    if _is_geo(t):
        if n not in _GEO_LENGTHS:
            raise _fail(t, data, "a bound point needs 16, 24 or 32 bytes (x:y[:z[:m]] as doubles)")
        return struct.unpack(f"<{n // 8}d", data)
    if name == "variant":
        return data
    raise _fail(t, data, "has no binary single-value serialization")


def _decimal_from_bytes(t: it.DecimalType, data: bytes) -> Decimal:
    if not data:
        raise _fail(t, data, "a decimal needs at least 1 byte")
    unscaled = int.from_bytes(data, "big", signed=True)
    digits = str(abs(unscaled))
    if len(digits) > t.precision:
        raise _fail(t, data, f"unscaled value {unscaled} has more than {t.precision} digits")
    return decimal_of(unscaled, t.scale)


def decimal_of(unscaled_value: int, scale: int) -> Decimal:
    """The Decimal ``unscaled_value * 10**-scale`` with exactly ``scale`` digits (no context rounding:
    ``Decimal(n).scaleb(-scale)`` rounds to 28 digits, and 38-digit decimals would change value)."""
    digits = tuple(int(c) for c in str(abs(unscaled_value)))
    return Decimal((1 if unscaled_value < 0 else 0, digits, -scale))


def _min_twos_complement(value: int) -> bytes:
    length = ((value if value >= 0 else ~value).bit_length() + 8) // 8
    return value.to_bytes(length, "big", signed=True)


def to_bytes(t: it.PrimitiveType, value: Any) -> bytes:
    """Encode ``value`` (in the module doc's Python form) as an Appendix D binary value of type ``t``."""
    name = t.name
    if value is None:
        raise _fail(t, None, "null has no single-value serialization")
    try:
        if name in _FIXED_WIDTH:
            fmt, _ = _FIXED_WIDTH[name]
            if fmt in ("<f", "<d"):
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise TypeError(f"expected a float, got {type(value).__name__}")
                return struct.pack(fmt, value)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"expected an int, got {type(value).__name__}")
            return struct.pack(fmt, value)
        if name == "boolean":
            if not isinstance(value, bool):
                raise TypeError(f"expected a bool, got {type(value).__name__}")
            return b"\x01" if value else b"\x00"
        if name == "string":
            if not isinstance(value, str):
                raise TypeError(f"expected a str, got {type(value).__name__}")
            return value.encode("utf-8")
        if name == "uuid":
            if isinstance(value, uuid.UUID):
                return value.bytes
            if isinstance(value, (bytes, bytearray)) and len(value) == 16:
                return bytes(value)
            raise TypeError(f"expected a uuid.UUID or 16 bytes, got {value!r}")
        if name == "binary" or isinstance(t, it.FixedType) or name == "variant":
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise TypeError(f"expected bytes, got {type(value).__name__}")
            out = bytes(value)
            if isinstance(t, it.FixedType) and len(out) != t.length:
                raise ValueError(f"expected exactly {t.length} bytes, got {len(out)}")
            return out
        if isinstance(t, it.DecimalType):
            return _decimal_to_bytes(t, value)
        if _is_geo(t):
            coords = tuple(float(c) for c in value)
            if len(coords) not in (2, 3, 4):
                raise ValueError(f"a bound point has 2 to 4 coordinates, got {len(coords)}")
            return struct.pack(f"<{len(coords)}d", *coords)
    except (TypeError, ValueError, OverflowError, struct.error) as exc:
        raise _fail(t, None, f"cannot encode {value!r}: {exc}") from None
    raise _fail(t, None, "has no binary single-value serialization")


def _decimal_to_bytes(t: it.DecimalType, value: Any) -> bytes:
    if not isinstance(value, Decimal) or not value.is_finite():
        raise TypeError(f"expected a finite decimal.Decimal, got {value!r}")
    sign, digits, exponent = value.as_tuple()
    coefficient = int("".join(map(str, digits)) or "0")
    shift = int(exponent) + t.scale  # exact integer arithmetic: Decimal ops would round at 28 digits
    if shift >= 0:
        unscaled = coefficient * 10**shift
    else:
        unscaled, rest = divmod(coefficient, 10**-shift)
        if rest:
            raise ValueError(f"{value} has more than {t.scale} fractional digits")
    if len(str(unscaled)) > t.precision:
        raise ValueError(f"{value} needs more than {t.precision} digits")
    return _min_twos_complement(-unscaled if sign else unscaled)


# -- vectorised decoding of a bounds column --------------------------------------------------------------


def physical_arrow_type(t: it.PrimitiveType) -> pa.DataType:
    """The Arrow type holding ``t``'s physical value: int32/int64 for dates, times and timestamps."""
    name = t.name
    if name in ("date", "int"):
        return pa.int32()
    if name in _FIXED_WIDTH and _FIXED_WIDTH[name][0] == "<q":
        return pa.int64()
    if name == "float":
        return pa.float32()
    if name == "double":
        return pa.float64()
    if name == "boolean":
        return pa.bool_()
    if name == "string":
        return pa.string()
    if name == "uuid":
        return pa.binary(16)
    if isinstance(t, it.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if _is_geo(t):
        return pa.list_(pa.float64())
    if name in ("binary", "variant") or isinstance(t, it.FixedType):
        return pa.binary()
    if name == "unknown":
        return pa.null()
    raise _fail(t, None, "has no physical Arrow type")


def decode_array(
    t: it.PrimitiveType, values: pa.Array | pa.ChunkedArray, *, invalid_as_unknown: bool = False
) -> pa.Array:
    """Decode a binary Arrow column of Appendix D values (nulls stay null) into :func:`physical_arrow_type`.

    Fixed-width types are decoded with numpy, per byte length (so a column mixing 4-byte bounds written
    before an int->long promotion with 8-byte ones decodes in one call); the others per value. A value
    that is not a valid ``t`` raises :class:`SingleValueError`, or with ``invalid_as_unknown`` (column
    bounds, which only narrow a search) decodes to null: a string bound some writers cut inside a UTF-8
    character (DuckDB's, before duckdb-iceberg#1138) is no bound rather than a failed scan.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type != pa.binary():
        values = values.cast(pa.binary())
    try:
        return _decode_array(t, values)
    except (SingleValueError, pa.ArrowInvalid):
        if not invalid_as_unknown:
            raise
    unknown = pa.nulls(1, physical_arrow_type(t))
    pieces = []
    for i in range(len(values)):
        try:
            pieces.append(_decode_array(t, values.slice(i, 1)))
        except (SingleValueError, pa.ArrowInvalid):
            pieces.append(unknown)
    return pa.concat_arrays(pieces) if pieces else pa.array([], physical_arrow_type(t))


def _decode_array(t: it.PrimitiveType, values: pa.Array) -> pa.Array:
    name = t.name
    if name in _FIXED_WIDTH or name == "boolean":
        return _decode_fixed_width(t, values)
    if name == "string":
        try:
            return values.cast(pa.string())
        except pa.ArrowInvalid:
            for v in values.to_pylist():  # raise naming the offending value
                if v is not None:
                    from_bytes(t, v)
            raise
    if isinstance(t, it.FixedType):
        longest = pc.max(pc.binary_length(values)).as_py()
        if longest is not None and longest > t.length:
            raise _fail(t, b"\x00" * longest, f"longer than the fixed length {t.length}")
        return values
    if name in ("binary", "variant"):
        return values
    if isinstance(t, it.DecimalType):
        return _decode_decimal(t, values)
    decoded = [None if v is None else from_bytes(t, v) for v in values.to_pylist()]
    if name == "uuid":
        decoded = [None if u is None else u.bytes for u in decoded]
    return pa.array(decoded, type=physical_arrow_type(t))


def _layout(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-value byte lengths, validity, start offsets, and the data buffer of a binary array."""
    n = len(values)
    lengths = pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    _, offsets_buf, data_buf = values.buffers()
    starts = np.frombuffer(offsets_buf, dtype=np.int32, count=n + values.offset)[values.offset :]
    raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return lengths, valid, starts, raw


def _decode_decimal(t: it.DecimalType, values: pa.Array) -> pa.Array:
    """Big-endian two's complement of any length 1..16 -> decimal128, sign-extended with numpy."""
    n = len(values)
    lengths, valid, starts, raw = _layout(values)
    bad = valid & ((lengths < 1) | (lengths > 16))
    if bad.any():
        raise _fail(t, values[int(np.argmax(bad))].as_py(), "a decimal128 value needs 1 to 16 bytes")
    out = np.zeros((n, 16), dtype=np.uint8)
    for length in np.unique(lengths[valid]):
        rows = np.nonzero(valid & (lengths == length))[0]
        cells = raw[starts[rows, None] + np.arange(length)[None, :]]
        out[rows, :length] = cells[:, ::-1]  # little-endian low bytes
        negative = rows[cells[:, 0] >= 0x80]
        out[negative, length:] = 0xFF
    validity = pa.array(valid, type=pa.bool_()).buffers()[1]
    arr = pa.Array.from_buffers(
        pa.decimal128(t.precision, t.scale), n, [validity, pa.py_buffer(out.tobytes())], int(n - valid.sum())
    )
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise _fail(t, None, f"a value does not fit: {exc}") from None
    return arr


def _decode_fixed_width(t: it.PrimitiveType, values: pa.Array) -> pa.Array:
    n = len(values)
    out_type = physical_arrow_type(t)
    # byte length -> (numpy little-endian dtype, multiplier to the column's unit)
    layouts: dict[int, tuple[str, int]] = {1: ("u1", 1)} if t.name == "boolean" else {}
    if t.name in _FIXED_WIDTH:
        fmt, width = _FIXED_WIDTH[t.name]
        layouts[width] = (fmt, 1)
        if t.name in _PROMOTED:
            old_fmt, old_width, scale = _PROMOTED[t.name]
            layouts[old_width] = (old_fmt, scale)
    lengths, valid, starts, raw = _layout(values)
    valid = valid.copy()  # promoted bounds out of range become unknown below
    bad = valid & ~np.isin(lengths, list(layouts))
    if bad.any():
        i = int(np.argmax(bad))
        expected = " or ".join(map(str, sorted(layouts)))
        raise _fail(t, values[i].as_py(), f"expected {expected} bytes")
    result = np.zeros(n, dtype=np.int64 if t.name == "boolean" else out_type.to_pandas_dtype())
    for length, (fmt, scale) in layouts.items():
        rows = np.nonzero(valid & (lengths == length))[0]
        if len(rows):
            cells = raw[starts[rows, None] + np.arange(length)[None, :]]
            decoded = np.ascontiguousarray(cells).reshape(-1).view(np.dtype(fmt)).astype(result.dtype)
            if scale != 1:  # a promoted date bound past the new unit's range (9999-12-31 in nanoseconds)
                limit = np.iinfo(np.int64).max // scale  # is no bound at all: it would wrap in int64
                valid[rows[np.abs(decoded) > limit]] = False
                decoded = np.where(np.abs(decoded) > limit, 0, decoded) * scale
            result[rows] = decoded
    if t.name == "boolean":
        return pa.array(result != 0, type=pa.bool_(), mask=~valid)
    return pa.array(result, type=out_type, mask=~valid)


def is_nan_bound(t: it.PrimitiveType, value: Any) -> bool:
    """True for a float/double bound that is NaN (the spec forbids them; pruners must ignore such bounds)."""
    return t.name in ("float", "double") and isinstance(value, float) and math.isnan(value)
