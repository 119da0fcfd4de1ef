"""year/month/day/hour from days or microseconds since the epoch, floor-divided (right before 1970)."""

import numpy as np

from .._jit import Int, scalar

MICROS_PER_DAY = 86_400_000_000
MICROS_PER_HOUR = 3_600_000_000
NANOS_PER_MICRO = 1_000


@scalar
def floor_div(v: Int, d: Int) -> Int:
    """Floor division of int64 (numba's ``//`` keeps Python's floor semantics on both targets)."""
    return np.int64(v) // d


@scalar
def civil_from_days(days: Int) -> tuple[Int, Int]:
    """(year, month 1..12) of a day count since 1970-01-01 in the proleptic Gregorian calendar."""
    z = np.int64(days) + 719468
    era = floor_div(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    m = mp + 3 if mp < 10 else mp - 9
    if m <= 2:
        y += 1
    return y, m


@scalar
def year_from_days(days: Int) -> Int:
    y, _ = civil_from_days(days)
    return y - 1970


@scalar
def month_from_days(days: Int) -> Int:
    y, m = civil_from_days(days)
    return (y - 1970) * 12 + (m - 1)


@scalar
def day_from_micros(micros: Int) -> Int:
    return floor_div(micros, MICROS_PER_DAY)


@scalar
def hour_from_micros(micros: Int) -> Int:
    return floor_div(micros, MICROS_PER_HOUR)


@scalar
def micros_from_nanos(nanos: Int) -> Int:
    return floor_div(nanos, NANOS_PER_MICRO)
