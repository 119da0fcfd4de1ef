"""The predicate tree: constants, And/Or/Not, unbound predicates on column names and bound predicates on
field ids, with the simplifying constructors (:func:`and_`, :func:`or_`, :func:`not_`) and
:func:`rewrite_not`.

Semantics (shared by every evaluator in this package):

- A comparison with a null value does not match (``x != 5`` and ``x not in (1, 2)`` do not match a null
  ``x``); ``is_null``/``not_null``/``is_nan``/``not_nan`` always give true or false (``not_nan`` matches
  null).
- NaN matches no ordering comparison (``<``, ``<=``, ``>``, ``>=``) and no ``=``/``in``; it matches ``!=`` and
  ``not in``. NaN is never a literal: use ``is_nan``/``not_nan``.
- Floats compare as IEEE 754 numbers: ``-0.0`` equals ``0.0`` for ``=``, ``!=``, ``in`` and ``not in`` alike
  (as in Spark SQL and DuckDB). Partition values are another matter: they compare by their bits (spec
  "Scan Planning", note 3; :func:`gpu_engine.iceberg.partitioning.partition_key`).
- ``not`` is defined by Iceberg's negation table (:meth:`Op.negate`, as Iceberg Java's ``RewriteNot``):
  ``not (x < 5)`` means ``x >= 5``, so it matches neither null nor NaN.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ExpressionError
from ..iceberg import types as it


class Kind(enum.Enum):
    UNARY = "unary"
    LITERAL = "literal"
    SET = "set"


class Op(enum.Enum):
    """A predicate operation; ``value`` is the Python API name."""

    IS_NULL = "is_null"
    NOT_NULL = "not_null"
    IS_NAN = "is_nan"
    NOT_NAN = "not_nan"
    LT = "lt"
    LT_EQ = "lt_eq"
    GT = "gt"
    GT_EQ = "gt_eq"
    EQ = "eq"
    NOT_EQ = "not_eq"
    IN = "in"
    NOT_IN = "not_in"
    STARTS_WITH = "starts_with"
    NOT_STARTS_WITH = "not_starts_with"

    @property
    def kind(self) -> Kind:
        if self in _UNARY:
            return Kind.UNARY
        return Kind.SET if self in (Op.IN, Op.NOT_IN) else Kind.LITERAL

    def negate(self) -> Op:
        return _NEGATE[self]

    def flip(self) -> Op:
        """The operation with its operands swapped: ``5 < x`` is ``x > 5``."""
        return _FLIP.get(self, self)

    @property
    def symbol(self) -> str:
        return _SYMBOL[self]


_UNARY = frozenset({Op.IS_NULL, Op.NOT_NULL, Op.IS_NAN, Op.NOT_NAN})
_PAIRS = [
    (Op.IS_NULL, Op.NOT_NULL),
    (Op.IS_NAN, Op.NOT_NAN),
    (Op.LT, Op.GT_EQ),
    (Op.LT_EQ, Op.GT),
    (Op.EQ, Op.NOT_EQ),
    (Op.IN, Op.NOT_IN),
    (Op.STARTS_WITH, Op.NOT_STARTS_WITH),
]
_NEGATE = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}
_FLIP = {Op.LT: Op.GT, Op.GT: Op.LT, Op.LT_EQ: Op.GT_EQ, Op.GT_EQ: Op.LT_EQ}
_SYMBOL = {
    Op.IS_NULL: "is null",
    Op.NOT_NULL: "is not null",
    Op.IS_NAN: "is nan",
    Op.NOT_NAN: "is not nan",
    Op.LT: "<",
    Op.LT_EQ: "<=",
    Op.GT: ">",
    Op.GT_EQ: ">=",
    Op.EQ: "=",
    Op.NOT_EQ: "!=",
    Op.IN: "in",
    Op.NOT_IN: "not in",
    Op.STARTS_WITH: "starts with",
    Op.NOT_STARTS_WITH: "not starts with",
}


class Expression:
    """A filter expression; ``a & b``, ``a | b`` and ``~a`` build simplified And/Or/Not."""

    __slots__ = ()

    def __and__(self, other: Expression) -> Expression:
        return and_(self, other)

    def __or__(self, other: Expression) -> Expression:
        return or_(self, other)

    def __invert__(self) -> Expression:
        return not_(self)


@dataclass(frozen=True)
class AlwaysTrue(Expression):
    def __str__(self) -> str:
        return "true"


@dataclass(frozen=True)
class AlwaysFalse(Expression):
    def __str__(self) -> str:
        return "false"


TRUE = AlwaysTrue()
FALSE = AlwaysFalse()


@dataclass(frozen=True)
class And(Expression):
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} and {self.right})"


@dataclass(frozen=True)
class Or(Expression):
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} or {self.right})"


@dataclass(frozen=True)
class Not(Expression):
    child: Expression

    def __str__(self) -> str:
        return f"not {self.child}"


def _check_literals(op: Op, literals: tuple[Any, ...], where: str) -> None:
    kind = op.kind
    if kind is Kind.UNARY and literals:
        raise ExpressionError(f"{op.value} on {where} takes no literal, got {literals!r}")
    if kind is Kind.LITERAL and len(literals) != 1:
        raise ExpressionError(f"{op.value} on {where} takes exactly one literal, got {literals!r}")
    if kind is Kind.SET and not literals:
        raise ExpressionError(f"{op.value} on {where} needs at least one literal")
    for v in literals:
        if v is None:
            raise ExpressionError(f"{op.value} on {where}: null is not a literal (use is_null / not_null)")
        if isinstance(v, float) and math.isnan(v):
            raise ExpressionError(f"{op.value} on {where}: NaN is not a literal (use is_nan / not_nan)")


def _format(op: Op, target: str, literals: tuple[Any, ...]) -> str:
    if op.kind is Kind.UNARY:
        return f"{target} {op.symbol}"
    if op.kind is Kind.SET:
        return f"{target} {op.symbol} ({', '.join(shown(v) for v in literals)})"
    return f"{target} {op.symbol} {shown(literals[0])}"


def shown(value: Any) -> str:
    """``repr(value)``; an int too long for Python to print (4300 digits) by its size."""
    try:
        return repr(value)
    except ValueError:
        return f"<an integer of {value.bit_length()} bits>"


@dataclass(frozen=True)
class UnboundPredicate(Expression):
    """A predicate on a column name (dotted for nested struct fields) with Python literal values."""

    op: Op
    term: str
    literals: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        _check_literals(self.op, self.literals, repr(self.term))

    @property
    def literal(self) -> Any:
        return self.literals[0]

    def __str__(self) -> str:
        return _format(self.op, self.term, self.literals)


@dataclass(frozen=True)
class BoundReference:
    """A field resolved in a schema (or a partition struct): its id, full name and primitive type."""

    field_id: int
    name: str
    type: it.PrimitiveType
    required: bool = False


@dataclass(frozen=True)
class BoundPredicate(Expression):
    """A predicate on a bound field; literals hold the type's physical value (see ``binding``).

    Set predicates keep their literals deduplicated and sorted, so equal sets compare equal.
    """

    op: Op
    ref: BoundReference
    literals: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        _check_literals(self.op, self.literals, f"field {self.ref.field_id} ({self.ref.name})")
        if self.op.kind is Kind.SET:
            object.__setattr__(self, "literals", tuple(sorted(set(self.literals))))

    @property
    def literal(self) -> Any:
        return self.literals[0]

    def __str__(self) -> str:
        return _format(self.op, self.ref.name, self.literals)


Predicate = UnboundPredicate | BoundPredicate


# -- simplifying constructors ------------------------------------------------------------------------


def and_(*exprs: Expression) -> Expression:
    """And of ``exprs`` with constants folded (``and_()`` is true)."""
    result: Expression = TRUE
    for e in exprs:
        if isinstance(result, AlwaysFalse) or isinstance(e, AlwaysFalse):
            return FALSE
        if isinstance(e, AlwaysTrue):
            continue
        result = e if isinstance(result, AlwaysTrue) else And(result, e)
    return result


def or_(*exprs: Expression) -> Expression:
    """Or of ``exprs`` with constants folded (``or_()`` is false)."""
    result: Expression = FALSE
    for e in exprs:
        if isinstance(result, AlwaysTrue) or isinstance(e, AlwaysTrue):
            return TRUE
        if isinstance(e, AlwaysFalse):
            continue
        result = e if isinstance(result, AlwaysFalse) else Or(result, e)
    return result


def not_(expr: Expression) -> Expression:
    if isinstance(expr, AlwaysTrue):
        return FALSE
    if isinstance(expr, AlwaysFalse):
        return TRUE
    if isinstance(expr, Not):
        return expr.child
    return Not(expr)


def negate(pred: Predicate) -> Predicate:
    if isinstance(pred, UnboundPredicate):
        return UnboundPredicate(pred.op.negate(), pred.term, pred.literals)
    return BoundPredicate(pred.op.negate(), pred.ref, pred.literals)


def rewrite_not(expr: Expression) -> Expression:
    """Push every Not down to the predicates (De Morgan, then :meth:`Op.negate`): the result has no Not."""
    if isinstance(expr, Not):
        return _negated(expr.child)
    if isinstance(expr, And):
        return and_(rewrite_not(expr.left), rewrite_not(expr.right))
    if isinstance(expr, Or):
        return or_(rewrite_not(expr.left), rewrite_not(expr.right))
    return expr


def _negated(expr: Expression) -> Expression:
    if isinstance(expr, Not):
        return rewrite_not(expr.child)
    if isinstance(expr, And):
        return or_(_negated(expr.left), _negated(expr.right))
    if isinstance(expr, Or):
        return and_(_negated(expr.left), _negated(expr.right))
    if isinstance(expr, (UnboundPredicate, BoundPredicate)):
        return negate(expr)
    return not_(expr)  # constants


def map_predicates(expr: Expression, fn: Callable[[Predicate], Expression]) -> Expression:
    """Rebuild ``expr`` with every predicate replaced by ``fn(predicate)``, simplifying on the way."""
    if isinstance(expr, And):
        return and_(map_predicates(expr.left, fn), map_predicates(expr.right, fn))
    if isinstance(expr, Or):
        return or_(map_predicates(expr.left, fn), map_predicates(expr.right, fn))
    if isinstance(expr, Not):
        return not_(map_predicates(expr.child, fn))
    if isinstance(expr, (UnboundPredicate, BoundPredicate)):
        return fn(expr)
    return expr


def predicates(expr: Expression) -> Iterable[Predicate]:
    """Every predicate of ``expr``, left to right."""
    if isinstance(expr, (And, Or)):
        yield from predicates(expr.left)
        yield from predicates(expr.right)
    elif isinstance(expr, Not):
        yield from predicates(expr.child)
    elif isinstance(expr, (UnboundPredicate, BoundPredicate)):
        yield expr


# -- bound helpers (binding and projection build predicates through these) ----------------------------


def bound_unary(op: Op, ref: BoundReference) -> Expression:
    """A unary predicate, folded where the field is required (never null)."""
    if ref.required and op in (Op.IS_NULL, Op.NOT_NULL):
        return FALSE if op is Op.IS_NULL else TRUE
    return BoundPredicate(op, ref)


def bound_set(op: Op, ref: BoundReference, values: Iterable[Any]) -> Expression:
    """``in``/``not in`` over ``values``: empty sets fold, single values become ``=``/``!=``."""
    unique = set(values)
    if not unique:
        return FALSE if op is Op.IN else bound_unary(Op.NOT_NULL, ref)
    if len(unique) == 1:
        return BoundPredicate(Op.EQ if op is Op.IN else Op.NOT_EQ, ref, (unique.pop(),))
    return BoundPredicate(op, ref, tuple(unique))
