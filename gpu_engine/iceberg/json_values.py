"""JSON single-value serialization (spec Appendix D), both directions: ``initial-default`` and
``write-default`` of schema fields.

Python values are the Iceberg physical values, as in :mod:`.serde`: ``int`` days for dates, ``int``
microseconds for times and timestamps (nanoseconds for the ``_ns`` types), :class:`~decimal.Decimal`
with exponent ``-S``, :class:`uuid.UUID`, ``bytes`` for fixed and binary. Nested values: a struct is a
``dict`` field id -> value (only the fields present in the JSON object), a list a ``list``, a map a
``list`` of ``(key, value)`` pairs. JSON ``null`` is ``None`` for every type.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import uuid
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from ..errors import SingleValueError
from . import types as it

_EPOCH = dt.date(1970, 1, 1)
_US_PER_DAY = 86_400_000_000
_NULL_ONLY = frozenset({"unknown", "variant", "geometry", "geography"})
_INT_LIMITS = {"int": it.INT_RANGE, "long": it.LONG_RANGE}
_WIDE = Context(prec=100)  # exact decimal arithmetic for up to 38 digits
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_TIME = r"(?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?"
_TIME_RE = re.compile(_TIME)
_TS_RE = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[T ]" + _TIME + r"(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?"
)


def _fail(t: it.IcebergType, value: Any, why: str) -> SingleValueError:
    return SingleValueError(f"JSON value {value!r:.200} is not a valid {t} default: {why}")


def from_json(t: it.IcebergType, value: Any) -> Any:
    """The physical value of JSON ``value`` (already parsed by ``json``) for Iceberg type ``t``."""
    if value is None:
        return None
    if isinstance(t, it.StructType):
        return _struct(t, value)
    if isinstance(t, it.ListType):
        if not isinstance(value, list):
            raise _fail(t, value, "a list default must be a JSON array")
        return [_element(t, t.element, v, t.element_required) for v in value]
    if isinstance(t, it.MapType):
        return _map(t, value)
    try:
        return _primitive(t, value)
    except SingleValueError:
        raise
    except (ValueError, TypeError, OverflowError, InvalidOperation) as exc:
        raise _fail(t, value, str(exc) or type(exc).__name__) from None


def _element(parent: it.IcebergType, t: it.IcebergType, value: Any, required: bool) -> Any:
    out = from_json(t, value)
    if out is None and required:
        raise _fail(parent, value, "holds null for a required element")
    return out


def _struct(t: it.StructType, value: Any) -> dict[int, Any]:
    if not isinstance(value, dict):
        raise _fail(t, value, "a struct default must be a JSON object keyed by field id")
    by_id = {f.field_id: f for f in t.fields}
    out: dict[int, Any] = {}
    for key, v in value.items():
        try:
            fid = int(key)
        except ValueError:
            raise _fail(t, value, f"key {key!r} is not a field id") from None
        if fid not in by_id:
            raise _fail(t, value, f"the struct has no field with id {fid}")
        out[fid] = _element(t, by_id[fid].type, v, by_id[fid].required)
    return out


def _map(t: it.MapType, value: Any) -> list[tuple[Any, Any]]:
    if not isinstance(value, dict) or set(value) != {"keys", "values"}:
        raise _fail(t, value, 'a map default must be {"keys": [...], "values": [...]}')
    keys, values = value["keys"], value["values"]
    if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
        raise _fail(t, value, "keys and values must be JSON arrays of equal length")
    return [
        (_element(t, t.key, k, True), _element(t, t.value, v, t.value_required))
        for k, v in zip(keys, values, strict=True)
    ]


def _primitive(t: it.PrimitiveType, value: Any) -> Any:
    name = t.name
    if name in _NULL_ONLY or isinstance(t, (it.GeometryType, it.GeographyType)):
        raise _fail(t, value, f"{name} columns default to null only")
    if name == "boolean":
        if not isinstance(value, bool):
            raise _fail(t, value, "expected a JSON boolean")
        return value
    if name in _INT_LIMITS:
        low, high = _INT_LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _fail(t, value, f"expected a JSON integer in [{low}, {high}]")
        return value
    if name in ("float", "double"):
        return _floating(t, value)
    if isinstance(t, it.DecimalType):
        return _decimal(t, value)
    if isinstance(t, it.FixedType) or name == "binary":
        raw = bytes.fromhex(_text(t, value))
        if isinstance(t, it.FixedType) and len(raw) != t.length:
            raise _fail(t, value, f"expected {t.length} bytes, got {len(raw)}")
        return raw
    if name == "string":
        return _text(t, value)
    if name == "uuid":
        return uuid.UUID(_text(t, value))
    if name == "date":
        return (dt.date.fromisoformat(_text(t, value)) - _EPOCH).days
    if name == "time":
        m = _TIME_RE.fullmatch(_text(t, value))
        if m is None:
            raise _fail(t, value, "expected 'HH:MM:SS[.ffffff]'")
        return _exact(t, value, _clock_nanos(m), 1000)
    if name in it.TIMESTAMP_NAMES:
        return _timestamp(t, value)
    raise _fail(t, value, "no JSON single-value form for this type")


def _text(t: it.PrimitiveType, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(t, value, "expected a JSON string")
    return value


def _floating(t: it.PrimitiveType, value: Any) -> float:
    if isinstance(value, str) and value in _FLOAT_WORDS:
        return _FLOAT_WORDS[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(t, value, "expected a JSON number")
    out = float(value)
    if t.name == "float" and math.isfinite(out):
        out = struct.unpack("<f", struct.pack("<f", out))[0]  # OverflowError beyond float32
    return out


def _decimal(t: it.DecimalType, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _fail(t, value, "expected a JSON string such as '14.20'")
    d = Decimal(value) if isinstance(value, int) else Decimal(value.strip())
    if not d.is_finite():
        raise _fail(t, value, "not a finite decimal")
    scaled = d.quantize(Decimal(1).scaleb(-t.scale), context=_WIDE)
    if scaled != d:
        raise _fail(t, value, f"has more than {t.scale} digits after the point")
    if len(scaled.as_tuple().digits) > t.precision and scaled != 0:
        raise _fail(t, value, f"has more than {t.precision} digits")
    return scaled


def _clock_nanos(m: re.Match[str]) -> int:
    h, mi, s = int(m["h"]), int(m["mi"]), int(m["s"] or 0)
    if h > 23 or mi > 59 or s > 59:
        raise ValueError("hour, minute or second out of range")
    return ((h * 60 + mi) * 60 + s) * 10**9 + int((m["f"] or "").ljust(9, "0"))


def _exact(t: it.PrimitiveType, value: Any, nanos: int, per: int) -> int:
    if nanos % per:
        raise _fail(t, value, "has more sub-second digits than the type holds")
    return nanos // per


def _timestamp(t: it.PrimitiveType, value: Any) -> int:
    m = _TS_RE.fullmatch(_text(t, value).strip())
    if m is None:
        raise _fail(t, value, "expected ISO-8601 'YYYY-MM-DDTHH:MM:SS[.ffffff][+00:00]'")
    zoned = t.name in it.ZONED_TIMESTAMP_NAMES
    tz = m["tz"]
    if zoned and tz is None:
        raise _fail(t, value, "a timestamptz default must carry a zone offset ('+00:00')")
    if not zoned and tz is not None:
        raise _fail(t, value, "a timestamp without zone must not carry an offset")
    days = (dt.date(int(m["y"]), int(m["mo"]), int(m["d"])) - _EPOCH).days
    nanos = days * _US_PER_DAY * 1000 + _clock_nanos(m) - (offset_nanos(tz) if tz else 0)
    return _exact(t, value, nanos, 1 if t.name.endswith("_ns") else 1000)


def offset_nanos(tz: str) -> int:
    """A zone offset (``Z``, ``+05:30``, ``-0800``) in nanoseconds; ValueError out of range."""
    if tz == "Z":
        return 0
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if hours > 18 or minutes > 59:
        raise ValueError(f"offset {tz} out of range")
    return sign * (hours * 60 + minutes) * 60 * 10**9


# -- to JSON --------------------------------------------------------------------------------------------


def to_json(t: it.IcebergType, value: Any) -> Any:
    """The JSON single-value form of physical ``value`` (inverse of :func:`from_json`)."""
    if value is None:
        return None
    if isinstance(t, it.StructType):
        types = {f.field_id: f.type for f in t.fields}
        return {str(fid): to_json(types[fid], v) for fid, v in value.items()}
    if isinstance(t, it.ListType):
        return [to_json(t.element, v) for v in value]
    if isinstance(t, it.MapType):
        return {
            "keys": [to_json(t.key, k) for k, _ in value],
            "values": [to_json(t.value, v) for _, v in value],
        }
    name = t.name
    if isinstance(t, it.DecimalType):
        return format(Decimal(value).quantize(Decimal(1).scaleb(-t.scale), context=_WIDE), "f")
    if isinstance(t, it.FixedType) or name == "binary":
        return bytes(value).hex()
    if name == "uuid":
        if isinstance(value, (bytes, bytearray)):
            return str(uuid.UUID(bytes=bytes(value)))
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    if name in ("float", "double") and not math.isfinite(value):
        raise SingleValueError(
            f"Iceberg {name} JSON single value: {value!r} has none (the form is a JSON number, which NaN and "
            "infinities are not)"
        )
    if name == "date":
        return (_EPOCH + dt.timedelta(days=value)).isoformat()
    if name == "time":
        return _clock(value * 1000, 6)
    if name.startswith("timestamp"):
        nanos = value if name.endswith("_ns") else value * 1000
        days, clock = divmod(nanos, _US_PER_DAY * 1000)
        day = (_EPOCH + dt.timedelta(days=days)).isoformat()
        text = f"{day}T{_clock(clock, 9 if name.endswith('_ns') else 6)}"
        return text + "+00:00" if name in it.ZONED_TIMESTAMP_NAMES else text
    return value


def _clock(nanos: int, digits: int) -> str:
    seconds, frac = divmod(nanos, 10**9)
    minutes, s = divmod(seconds, 60)
    h, mi = divmod(minutes, 60)
    fraction = str(frac).rjust(9, "0")[:digits]
    return f"{h:02d}:{mi:02d}:{s:02d}.{fraction}"


_PER_DAY = {"timestamp": 86_400_000_000, "timestamptz": 86_400_000_000}
_PER_DAY |= {"timestamp_ns": 86_400_000_000_000, "timestamptz_ns": 86_400_000_000_000}


def promoted(old: it.IcebergType, new: it.IcebergType, value: Any) -> Any:
    """A default's JSON ``value`` of type ``old`` in the promoted type ``new`` (Java's NestedField casts
    defaults to the field's type): a date becomes midnight of that day, other promotions keep the value."""
    if value is None:
        return None
    physical = from_json(old, value)
    if isinstance(old, it.PrimitiveType) and old.name == "date" and isinstance(new, it.PrimitiveType):
        physical *= _PER_DAY.get(new.name, 1)
    return to_json(new, physical)
