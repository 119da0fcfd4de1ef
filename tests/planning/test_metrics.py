"""Inclusive metrics rules: what statistics can and cannot prove, vectorised over files."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.expressions import TRUE, BoundPredicate, Op, and_, not_, or_
from gpu_engine.expressions.tree import BoundReference
from gpu_engine.iceberg import types as it
from gpu_engine.planning.metrics import ColumnStats, might_match

LONG = BoundReference(1, "x", it.LONG)
STR = BoundReference(2, "s", it.STRING)
DBL = BoundReference(3, "d", it.DOUBLE)

# five files: [0, 10], [20, 30], all null, no stats, [5, 5] without nulls
X = ColumnStats(
    lower=pa.array([0, 20, None, None, 5], pa.int64()),
    upper=pa.array([10, 30, None, None, 5], pa.int64()),
    null_count=pa.array([1, 0, 7, None, 0], pa.int64()),
    value_count=pa.array([9, 9, 7, None, 3], pa.int64()),
    nan_count=pa.array([None] * 5, pa.int64()),
    all_null=pa.array([False, False, True, None, False]),
)
S = ColumnStats(
    lower=pa.array(["apple", "bx", None, "a", "ab"]),
    upper=pa.array(["apricot", "bz", None, "c", "ab"]),
    null_count=pa.array([0, 0, 2, None, 0], pa.int64()),
)
D = ColumnStats(
    lower=pa.array([float("nan"), 1.0, None, None, 2.0]),
    upper=pa.array([float("nan"), 3.0, None, None, 2.0]),
    nan_count=pa.array([4, 0, None, None, 0], pa.int64()),
    value_count=pa.array([4, 5, None, None, 1], pa.int64()),
)
STATS = {1: X, 2: S, 3: D}


def pred(op: Op, ref: BoundReference, *literals: Any) -> BoundPredicate:
    return BoundPredicate(op, ref, tuple(literals))


def keep(expr: Any) -> list[bool]:
    return [bool(v) for v in might_match(expr, 5, lambda ref: STATS[ref.field_id]).to_pylist()]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (pred(Op.LT, LONG, 0), [False, False, False, True, False]),
        (pred(Op.LT_EQ, LONG, 0), [True, False, False, True, False]),
        (pred(Op.GT, LONG, 10), [False, True, False, True, False]),
        (pred(Op.GT_EQ, LONG, 30), [False, True, False, True, False]),
        (pred(Op.EQ, LONG, 5), [True, False, False, True, True]),
        (pred(Op.EQ, LONG, 15), [False, False, False, True, False]),
        (pred(Op.NOT_EQ, LONG, 5), [True] * 5),  # statistics never prove not-equal
        (pred(Op.IN, LONG, 11, 40), [False, False, False, True, False]),
        (pred(Op.IN, LONG, 11, 25), [False, True, False, True, False]),
        (pred(Op.IN, LONG, -1, 5, 40), [True, False, False, True, True]),
        (pred(Op.NOT_IN, LONG, 5), [True] * 5),
        (pred(Op.IS_NULL, LONG), [True, False, True, True, False]),
        (pred(Op.NOT_NULL, LONG), [True, True, False, True, True]),
        (and_(pred(Op.GT, LONG, 4), pred(Op.LT, LONG, 21)), [True, True, False, True, True]),
        (or_(pred(Op.LT, LONG, 0), pred(Op.GT, LONG, 29)), [False, True, False, True, False]),
        (not_(pred(Op.GT_EQ, LONG, 1)), [True, False, False, True, False]),  # not x >= 1 is x < 1
        (TRUE, [True] * 5),
    ],
)
def test_long_rules(expr: Any, expected: list[bool]) -> None:
    assert keep(expr) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # file 2 has no bounds and unknown value counts: nothing can be proved about it
        (pred(Op.STARTS_WITH, STR, "ap"), [True, False, True, True, False]),
        (pred(Op.STARTS_WITH, STR, "b"), [False, True, True, True, False]),
        (pred(Op.NOT_STARTS_WITH, STR, "ab"), [True, True, True, True, False]),
        (pred(Op.EQ, STR, "b"), [False, False, True, True, False]),
    ],
)
def test_string_rules(expr: Any, expected: list[bool]) -> None:
    assert keep(expr) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (pred(Op.IS_NAN, DBL), [True, False, True, True, False]),
        (pred(Op.NOT_NAN, DBL), [False, True, True, True, True]),
        (pred(Op.GT, DBL, 2.5), [True, True, True, True, False]),  # NaN bounds are no bounds
    ],
)
def test_nan_rules(expr: Any, expected: list[bool]) -> None:
    assert keep(expr) == expected
