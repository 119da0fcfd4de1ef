"""The Python API for filters: unbound predicates on column names (dotted for nested struct fields).

``and_(greater_than_or_equal("ts", "2024-01-01"), is_in("id", [1, 2]))``, or with operators:
``greater_than("x", 1) & ~is_null("y")``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .tree import FALSE, Expression, Op, UnboundPredicate


def is_null(name: str) -> UnboundPredicate:
    return UnboundPredicate(Op.IS_NULL, name)


def not_null(name: str) -> UnboundPredicate:
    return UnboundPredicate(Op.NOT_NULL, name)


def is_nan(name: str) -> UnboundPredicate:
    return UnboundPredicate(Op.IS_NAN, name)


def not_nan(name: str) -> UnboundPredicate:
    return UnboundPredicate(Op.NOT_NAN, name)


def less_than(name: str, value: Any) -> UnboundPredicate:
    return UnboundPredicate(Op.LT, name, (value,))


def less_than_or_equal(name: str, value: Any) -> UnboundPredicate:
    return UnboundPredicate(Op.LT_EQ, name, (value,))


def greater_than(name: str, value: Any) -> UnboundPredicate:
    return UnboundPredicate(Op.GT, name, (value,))


def greater_than_or_equal(name: str, value: Any) -> UnboundPredicate:
    return UnboundPredicate(Op.GT_EQ, name, (value,))


def equal_to(name: str, value: Any) -> UnboundPredicate:
    return UnboundPredicate(Op.EQ, name, (value,))


def not_equal_to(name: str, value: Any) -> UnboundPredicate:
    return UnboundPredicate(Op.NOT_EQ, name, (value,))


def is_in(name: str, values: Iterable[Any]) -> Expression:
    """``name in values``; an empty set matches nothing (false)."""
    literals = tuple(values)
    return UnboundPredicate(Op.IN, name, literals) if literals else FALSE


def not_in(name: str, values: Iterable[Any]) -> Expression:
    """``name not in values``; an empty set matches every non-null value."""
    literals = tuple(values)
    return UnboundPredicate(Op.NOT_IN, name, literals) if literals else not_null(name)


def starts_with(name: str, prefix: str) -> UnboundPredicate:
    return UnboundPredicate(Op.STARTS_WITH, name, (prefix,))


def not_starts_with(name: str, prefix: str) -> UnboundPredicate:
    return UnboundPredicate(Op.NOT_STARTS_WITH, name, (prefix,))
