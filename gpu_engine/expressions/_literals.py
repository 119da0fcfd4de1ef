"""Literal conversion: a Python value (or the string form a filter string carries) to an Iceberg type's
physical value, exactly.

Physical values: ``bool``; ``int`` for int, long, date (days), time (micros), timestamp/timestamptz
(micros) and timestamp_ns/timestamptz_ns (nanos); ``float``; :class:`~decimal.Decimal` with exactly the
type's scale; ``str``; :class:`uuid.UUID`; ``bytes`` for fixed and binary.

A literal that falls between two representable values (``2.5`` for an int, ``1.255`` for
``decimal(9, 2)``, ``'...00.0000005'`` for a microsecond timestamp, a value beyond the type's range) is
not rounded: :func:`fit` returns a :class:`Between` with its representable neighbours and the binder
rewrites the comparison exactly (``x < 2.5`` becomes ``x <= 2``, ``x = 2.5`` becomes false).
Floating-point columns are the exception: a literal denotes the nearest float/double, as its text would
when read into that type; ``'inf'``, ``'-Infinity'`` and ``Decimal('Infinity')`` are infinities. Magnitudes
beyond 10^±80 are decided by their sign alone (every type's range and grid lies within).

Strings for temporal types are ISO-8601: ``2024-01-01``, ``2024-01-01T10:00:00[.fffffffff]`` (``T`` or a
space). ``timestamptz`` literals may carry an offset (``Z``, ``+02:00``, ``-0530``); without one they are
taken as UTC. ``timestamp`` (without zone), ``date`` and ``time`` literals must not carry an offset.
Integers given for temporal types are already physical (days, micros, or nanos for ``*_ns``); a pandas
Timestamp keeps its nanoseconds.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import ExpressionError
from ..iceberg import types as it
from ..iceberg.json_values import offset_nanos
from ..iceberg.serde import decimal_of
from .tree import shown


@dataclass(frozen=True)
class Exact:
    value: Any


@dataclass(frozen=True)
class Between:
    """The literal lies strictly between ``below`` and ``above`` (None: beyond the type's range)."""

    below: Any
    above: Any


Fit = Exact | Between

INT32 = it.INT_RANGE
INT64 = it.LONG_RANGE
NANOS_PER = {"day": 86_400_000_000_000, "micro": 1_000}
_MICROS_PER_DAY = 86_400_000_000
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT64_MAX = float(np.finfo(np.float64).max)
_EPOCH = dt.date(1970, 1, 1)
_ISO = re.compile(
    r"(?P<y>[+-]?\d{4,})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r"(?:[T ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?)?"
    r"(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?"
)
_TIME = re.compile(r"(?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?")


def bounds(t: it.PrimitiveType) -> tuple[Any, Any] | None:
    """The smallest and largest physical value of an ordered type with a finite domain, else None."""
    if t.name in ("int", "date"):
        return INT32
    if t.name == "long" or t.name in it.TIMESTAMP_NAMES:
        return INT64
    if t.name == "time":
        return (0, _MICROS_PER_DAY - 1)
    if isinstance(t, it.DecimalType):
        top = 10**t.precision - 1
        return (decimal_of(-top, t.scale), decimal_of(top, t.scale))
    return None


def step(value: Any, t: it.PrimitiveType, delta: int) -> Any:
    """The physical value ``delta`` units (1, or one unit of the decimal's scale) away, None if outside."""
    limits = bounds(t)
    if isinstance(t, it.DecimalType):
        out: Any = decimal_of(unscaled(value, t.scale) + delta, t.scale)
    else:
        out = value + delta
    if limits is not None and not limits[0] <= out <= limits[1]:
        return None
    return out


def unscaled(value: Decimal, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale`` (``value`` must be exact at that scale)."""
    q = Fraction(value) * 10**scale
    if q.denominator != 1:
        raise ExpressionError(f"decimal {value} has more than {scale} fraction digits")
    return int(q.numerator)


def fit(value: Any, t: it.PrimitiveType, what: str) -> Fit:
    """``value`` as a physical value of ``t``; ``what`` names the predicate for error messages."""
    if isinstance(value, float) and math.isnan(value):
        raise ExpressionError(f"{what}: NaN is not a literal (use is_nan / not_nan)")
    name = t.name
    try:
        if name == "boolean":
            return Exact(_boolean(value))
        if name in ("int", "long"):
            return _grid(_rational(value), 1, _int_bounds(t))
        if name in ("float", "double"):
            return _floating(value, name == "float")
        if isinstance(t, it.DecimalType):
            scale = t.scale
            limits = (-(10**t.precision) + 1, 10**t.precision - 1)
            fitted = _grid(_rational(value), 10**scale, limits)
            return _map_fit(fitted, lambda n: decimal_of(n, scale))
        if name in ("date", "time") or name in _TIMESTAMPS:
            return _temporal(value, t)
        if name == "string" and isinstance(value, str):
            return Exact(value)
        if name == "uuid":
            return Exact(_uuid(value))
        if isinstance(t, it.FixedType) and isinstance(value, (bytes, bytearray)):
            if len(value) != t.length:
                raise ExpressionError(f"{what}: {len(value)} bytes given for {t}")
            return Exact(bytes(value))
        if name == "binary" and isinstance(value, (bytes, bytearray)):
            return Exact(bytes(value))
    except (ValueError, TypeError, ArithmeticError) as exc:
        if isinstance(exc, ExpressionError):
            raise
        raise ExpressionError(f"{what}: cannot convert {shown(value)} to {t}: {exc}") from None
    kind = type(value).__name__
    raise ExpressionError(f"{what}: literal {shown(value)} ({kind}) cannot be compared with {t}")


_TIMESTAMPS = it.TIMESTAMP_NAMES


def exact_value(value: Any, t: it.PrimitiveType, what: str) -> Any:
    """``value`` as a physical value of ``t`` (days, microseconds, nanoseconds, ...) when it is one
    exactly; :class:`ExpressionError` naming ``what`` otherwise (a datetime with a time for a date, a
    pandas Timestamp's nanoseconds for a microsecond type)."""
    fitted = fit(value, t, what)
    if isinstance(fitted, Between) and (fitted.below is None or fitted.above is None):
        raise ExpressionError(f"{what}: {value!r} lies outside the range of {t}")
    if not isinstance(fitted, Exact):
        raise ExpressionError(f"{what}: {value!r} is no value of {t} (it falls between two of them)")
    return fitted.value


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError("expected true or false")


_HUGE = 80
"""Every type's range and grid lies within 10^±80 (decimal(38, 38), nanoseconds and doubles' integer part
included): a literal of larger or smaller magnitude is decided as ±10^±81, without building its exact value
(an exponent of millions would take minutes)."""


def _rational(value: Any) -> Fraction:
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if math.isinf(value):
            raise ValueError("infinity has no exact value here")
        return Fraction(Decimal(repr(value)))  # the shortest decimal that reads back as this float
    if isinstance(value, (Decimal, str)):
        dec = _decimal(value)
        if not dec.is_finite():
            raise ValueError("not a finite number")
        if dec and abs(dec.adjusted()) > _HUGE:
            dec = Decimal(1).scaleb(_HUGE + 1 if dec.adjusted() > 0 else -_HUGE - 1).copy_sign(dec)
        return Fraction(dec)
    raise TypeError("expected a number")


def _decimal(value: Decimal | str) -> Decimal:
    if isinstance(value, Decimal):
        return value
    try:
        return Decimal(value.strip())
    except InvalidOperation:
        raise ValueError("not a number") from None


def _grid(q: Fraction, per_unit: int, limits: tuple[int, int]) -> Fit:
    """``q`` on the integer grid of multiples of ``1/per_unit`` within ``limits`` (grid units)."""
    scaled = q * per_unit
    lo, hi = limits
    floor = math.floor(scaled)
    if scaled.denominator == 1 and lo <= floor <= hi:
        return Exact(floor)
    if floor >= hi:
        return Between(hi, None)
    if floor < lo:
        return Between(None, lo)
    return Between(floor, floor + 1)


def _map_fit(f: Fit, make: Any) -> Fit:
    if isinstance(f, Exact):
        return Exact(make(f.value))
    return Between(None if f.below is None else make(f.below), None if f.above is None else make(f.above))


def _floating(value: Any, single: bool) -> Fit:
    """The nearest float (``single``) or double; a finite literal beyond the type's range lies between
    its largest finite value and infinity; infinity (a float, ``'inf'``, ``Decimal('Infinity')``) is
    infinity."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
        raise TypeError("expected a number")
    exact = value if isinstance(value, (float, int)) else _decimal(value)
    exact = Decimal(exact) if isinstance(exact, int) else exact  # (no text: huge ints have none)
    f = float(exact)
    if math.isnan(f):
        raise ValueError("NaN is not a literal (use is_nan / not_nan)")
    given_inf = math.isinf(exact) if isinstance(exact, float) else exact.is_infinite()
    top = _FLOAT32_MAX if single else _FLOAT64_MAX
    if not given_inf and (math.isinf(f) or abs(f) > top):
        if f > 0:
            return Between(top, math.inf)
        return Between(-math.inf, -top)
    return Exact(float(np.float32(f)) if single else f)


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        return uuid.UUID(value.strip())
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return uuid.UUID(bytes=bytes(value))
    raise TypeError("expected a UUID, its string form or 16 bytes")


# -- temporal literals: exact nanoseconds, then the column's grid ------------------------------------


def _int_bounds(t: it.PrimitiveType) -> tuple[int, int]:
    limits = bounds(t)
    assert limits is not None
    return limits


def _temporal(value: Any, t: it.PrimitiveType) -> Fit:
    name, limits = t.name, _int_bounds(t)
    if isinstance(value, int) and not isinstance(value, bool):
        return _grid(Fraction(value), 1, limits)  # already physical
    if name == "time":
        return _grid(Fraction(_time_nanos(value), NANOS_PER["micro"]), 1, limits)
    nanos = _instant_nanos(value, zoned=name in it.ZONED_TIMESTAMP_NAMES)
    if name == "date":
        return _grid(Fraction(nanos, NANOS_PER["day"]), 1, limits)
    per = 1 if name.endswith("_ns") else NANOS_PER["micro"]
    return _grid(Fraction(nanos, per), 1, limits)


def _fraction_nanos(digits: str | None) -> int:
    return int((digits or "").ljust(9, "0"))


def _time_nanos(value: Any) -> int:
    if isinstance(value, dt.time):
        if value.tzinfo is not None:
            raise ValueError("time literals carry no zone")
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 10**9 + value.microsecond * 1000
    if not isinstance(value, str):
        raise TypeError("expected 'HH:MM:SS[.fffffffff]' or a datetime.time")
    m = _TIME.fullmatch(value.strip())
    if m is None:
        raise ValueError("expected 'HH:MM:SS[.fffffffff]'")
    h, mi, s = int(m["h"]), int(m["mi"]), int(m["s"] or 0)
    if h > 23 or mi > 59 or s > 59:
        raise ValueError("hour, minute or second out of range")
    return ((h * 60 + mi) * 60 + s) * 10**9 + _fraction_nanos(m["f"])


def _instant_nanos(value: Any, *, zoned: bool) -> int:
    """Nanoseconds since 1970-01-01T00:00 (UTC for zoned types) of a date/datetime/ISO string."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            if not zoned:
                raise ValueError("an offset or zone is not allowed for a type without zone")
            offset = value.utcoffset() or dt.timedelta(0)
            value = value.replace(tzinfo=None) - offset
        days = (value.date() - _EPOCH).days
        clock = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**9 + value.microsecond * 1000
        clock += int(getattr(value, "nanosecond", 0))  # pandas.Timestamp: the nanoseconds past microsecond
        return int(days * NANOS_PER["day"] + clock)
    if isinstance(value, dt.date):
        return int((value - _EPOCH).days) * NANOS_PER["day"]
    if not isinstance(value, str):
        raise TypeError("expected an ISO-8601 string, a datetime.date or a datetime.datetime")
    m = _ISO.fullmatch(value.strip())
    if m is None:
        raise ValueError("expected ISO-8601 'YYYY-MM-DD[THH:MM[:SS[.fffffffff]]][Z|+HH:MM]'")
    days = (dt.date(int(m["y"]), int(m["mo"]), int(m["d"])) - _EPOCH).days
    h, mi, s = int(m["h"] or 0), int(m["mi"] or 0), int(m["s"] or 0)
    if h > 23 or mi > 59 or s > 59:
        raise ValueError("hour, minute or second out of range")
    nanos = days * NANOS_PER["day"] + ((h * 60 + mi) * 60 + s) * 10**9 + _fraction_nanos(m["f"])
    if m["tz"]:
        if not zoned:
            raise ValueError("an offset is not allowed for a type without zone")
        nanos -= offset_nanos(m["tz"])
    return nanos
