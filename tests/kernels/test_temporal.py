"""year/month/day/hour kernels against Python's calendar, before and after 1970."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.kernels import temporal

from .conftest import Place

Host = Callable[[Any], np.ndarray[Any, Any]]
EPOCH = dt.date(1970, 1, 1)
DAYS = st.integers((dt.date(1, 1, 1) - EPOCH).days, (dt.date(9999, 12, 31) - EPOCH).days)
MICROS = st.integers(-62135596800 * 10**6, 253402300799 * 10**6)


def ref_year_month(days: int) -> tuple[int, int]:
    d = EPOCH + dt.timedelta(days=days)
    return d.year - 1970, (d.year - 1970) * 12 + d.month - 1


@given(st.lists(DAYS, max_size=64))
def test_dates(place: Place, host: Host, values: list[int]) -> None:
    arr = place(np.array(values, np.int32))
    assert host(temporal.extract("year", arr, temporal.DAYS)).tolist() == [
        ref_year_month(v)[0] for v in values
    ]
    assert host(temporal.extract("month", arr, temporal.DAYS)).tolist() == [
        ref_year_month(v)[1] for v in values
    ]
    assert host(temporal.extract("day", arr, temporal.DAYS)).tolist() == values


NANO_SAFE = st.integers(-(2**63) // 1000 + 1, (2**63 - 1000) // 1000)  # micros whose nanos fit int64


@given(
    st.one_of(
        st.tuples(st.lists(MICROS, max_size=64), st.just(False)),
        st.tuples(st.lists(NANO_SAFE, max_size=64), st.just(True)),
    )
)
def test_timestamps(place: Place, host: Host, case: tuple[list[int], bool]) -> None:
    micros, nanos = case
    raw = [m * 1000 + 999 if nanos else m for m in micros]  # sub-micro parts floor away
    arr = place(np.array(raw, np.int64))
    unit = temporal.NANOS if nanos else temporal.MICROS
    days = [m // 86_400_000_000 for m in micros]
    assert host(temporal.extract("day", arr, unit)).tolist() == days
    assert host(temporal.extract("hour", arr, unit)).tolist() == [m // 3_600_000_000 for m in micros]
    assert host(temporal.extract("year", arr, unit)).tolist() == [ref_year_month(d)[0] for d in days]
    assert host(temporal.extract("month", arr, unit)).tolist() == [ref_year_month(d)[1] for d in days]


def test_hour_of_days_is_refused() -> None:
    with pytest.raises(ValueError, match="hour needs a timestamp"):
        temporal.extract("hour", np.zeros(1, np.int32), temporal.DAYS)


def java_int(v: int) -> int:
    """Java's ``(int)`` cast: the low 32 bits, signed."""
    return (v + 2**31) % 2**32 - 2**31


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=32))
def test_hours_beyond_an_int_wrap_as_java_casts_them(place: Place, host: Host, micros: list[int]) -> None:
    """Java: ``(int) ChronoUnit.HOURS.between(EPOCH, ts)``; every long of micros is a valid timestamp,
    and hours past 2**31 wrap. The CUDA kernel (and its simulator) stored the int64 hour into the int32
    output: the simulator raised OverflowError where the CPU loop narrowed."""
    arr = place(np.array(micros, np.int64))
    got = host(temporal.extract("hour", arr, temporal.MICROS)).tolist()
    assert got == [java_int(m // 3_600_000_000) for m in micros]
