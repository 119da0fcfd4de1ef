"""year/month/day/hour over date (int32 days), timestamp (int64 micros) and timestamp_ns (int64 nanos)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import elementwise as ew
from ._jit import Int, scalar
from .scalar import temporal as tp
from .scalar.truncate import wrap_int32

# Source units understood by the entry points.
DAYS = 0
MICROS = 1
NANOS = 2


@scalar
def _to_days(v: Int, unit: Int) -> Int:
    if unit == DAYS:
        return np.int64(v)
    if unit == NANOS:
        v = tp.micros_from_nanos(v)
    return tp.day_from_micros(v)


@scalar
def _year(v: Int, unit: Int) -> Int:
    return tp.year_from_days(_to_days(v, unit))


@scalar
def _month(v: Int, unit: Int) -> Int:
    return tp.month_from_days(_to_days(v, unit))


@scalar
def _day(v: Int, unit: Int) -> Int:
    return _to_days(v, unit)


@scalar
def _hour(v: Int, unit: Int) -> Int:
    if unit == NANOS:
        v = tp.micros_from_nanos(v)
    return wrap_int32(tp.hour_from_micros(v))  # Java's (int) HOURS.between: far-future hours wrap


_SIGS = tuple(f"void(int64, int32[::1], {t}[::1], int64)" for t in ("int32", "int64"))
YEAR = ew.fixed("year", _year, _SIGS)
MONTH = ew.fixed("month", _month, _SIGS)
DAY = ew.fixed("day", _day, _SIGS)
HOUR = ew.fixed("hour", _hour, _SIGS[1:])
KERNELS = (YEAR, MONTH, DAY, HOUR)
_BY_NAME = {k.name: k for k in KERNELS}


def extract(part: str, values: Any, unit: int) -> Any:
    """``part`` in year/month/day/hour of values in ``unit`` (DAYS, MICROS or NANOS) -> int32."""
    if part == "hour" and unit == DAYS:
        raise ValueError("hour needs a timestamp source, not days")
    kernel = _BY_NAME[part]
    n = values.shape[0]
    out = ew.empty(values, n, np.int32)
    kernel(n, out, values, unit)
    return out
