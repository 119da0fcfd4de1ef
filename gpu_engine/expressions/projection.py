"""Inclusive and strict projection of a bound row filter onto a partition spec ("Scan Planning").

- Inclusive: if a row matches the row filter, its partition tuple matches the projection (used to prune
  files). A predicate a transform cannot project becomes true; several partition fields on one source
  column combine with and.
- Strict: if a partition tuple matches the projection, every row with that tuple matches the row filter
  (used for residuals, deletes and compaction). A predicate that cannot be projected becomes false;
  several fields on one source combine with or.

Both first push every Not down to the predicates (:func:`~.tree.rewrite_not`). The result is bound to the
partition struct: references carry the partition field's id, name and result type, literals are the
transformed physical values (computed by :func:`gpu_engine.transforms.apply` on the CPU, so the kernels
stay the one implementation of every transform).

Per transform, as Iceberg Java's ``ProjectionUtil``: identity keeps the predicate; bucket projects
``=``/``in`` (inclusive) and ``!=``/``not in`` (strict); truncate and year/month/day/hour project
comparisons with the closed-bound adjustments (inclusive ``x < v`` is ``p <= f(v - 1)``, strict ``x <= v``
is ``p < f(v + 1)``) and truncated strings project ``starts_with`` by prefix length; void and unknown
transforms project nothing. Temporal projections of dates and timestamps (but not ``day`` of a date) are
widened for partition values written by Iceberg 0.10 and earlier, which put pre-1970 values one unit
too high (Java's ``fixInclusiveTimeProjection`` / ``fixStrictTimeProjection``). An ``hour`` literal of a
microsecond timestamp whose hour lies beyond int projects nothing: stored hours wrap there, as Java's do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ExpressionError
from ..iceberg import types as it
from ..iceberg.partitioning import PartitionField, PartitionSpec
from ..transforms import spec as ts
from . import _arrow
from . import _literals as lit
from .tree import (
    FALSE,
    TRUE,
    BoundPredicate,
    BoundReference,
    Expression,
    Kind,
    Op,
    Predicate,
    and_,
    bound_set,
    map_predicates,
    or_,
    rewrite_not,
)

Values = Callable[[Sequence[Any]], list[Any]]


def project_inclusive(expr: Expression, spec: PartitionSpec) -> Expression:
    """The inclusive projection of a bound row filter: matches the partition of every matching row."""
    return _project(expr, spec, strict=False)


def project_strict(expr: Expression, spec: PartitionSpec) -> Expression:
    """The strict projection of a bound row filter: a matching partition holds only matching rows."""
    return _project(expr, spec, strict=True)


def partition_reference(field: PartitionField, source: BoundReference) -> BoundReference | None:
    """The partition struct's reference for ``field`` over ``source``; None where it cannot project."""
    transform = field.parsed
    if len(field.source_ids) != 1 or field.source_id != source.field_id:
        return None
    if isinstance(transform, (ts.Void, ts.UnknownTransform)) or not transform.can_transform(source.type):
        return None
    return BoundReference(field.field_id, field.name, transform.result_type(source.type))


def _project(expr: Expression, spec: PartitionSpec, *, strict: bool) -> Expression:
    def project_one(pred: Predicate) -> Expression:
        if not isinstance(pred, BoundPredicate):
            raise ExpressionError(f"cannot project unbound predicate {pred}: bind the filter first")
        parts = [_project_field(pred, f, strict) for f in spec.fields]
        if strict:
            return or_(*(FALSE if p is None else p for p in parts))
        return and_(*(TRUE if p is None else p for p in parts))

    return map_predicates(rewrite_not(expr), project_one)


def _project_field(pred: BoundPredicate, field: PartitionField, strict: bool) -> Expression | None:
    ref = partition_reference(field, pred.ref)
    if ref is None:
        return None
    transform, source = field.parsed, pred.ref.type
    if isinstance(transform, ts.Identity):
        return BoundPredicate(pred.op, ref, pred.literals)
    if pred.op in (Op.IS_NULL, Op.NOT_NULL):
        return BoundPredicate(pred.op, ref)  # every transform maps null, and only null, to null
    if pred.op.kind is Kind.UNARY:
        return None
    values = _transformer(transform, source, ref.type)
    if isinstance(transform, ts.Bucket):
        return _bucket(pred, ref, values, strict)
    if isinstance(transform, ts.Truncate) and source.name in ("string", "binary"):
        return _truncate_array(pred, ref, values, transform.width, strict)
    if isinstance(transform, ts.Truncate) and isinstance(source, it.DecimalType):
        projected = _ordered(pred, ref, values, strict)
        return None if projected is None else map_predicates(projected, functools.partial(_fit_decimal, ref))
    if isinstance(transform, ts.Truncate) and source.name in ("int", "long"):
        projected = _truncate_integer(pred, ref, values, transform.width, strict)
        return _int_era(projected, ref, transform, strict) if source.name == "long" else projected
    if isinstance(transform, ts.Hour) and any(_wraps_hours(source, v) for v in pred.literals):
        return None  # its hour lies beyond int: stored partitions wrap there (as Java's), so no order holds
    projected = _ordered(pred, ref, values, strict)
    if isinstance(transform, ts.Temporal) and not (isinstance(transform, ts.Day) and source.name == "date"):
        return _fix_strict(projected) if strict else _fix_inclusive(projected)
    return projected


_HOUR_UNITS = {"timestamp": 3_600_000_000, "timestamptz": 3_600_000_000}  # ns types stay within int


def _wraps_hours(source: it.PrimitiveType, value: Any) -> bool:
    """The hour of ``value`` (a literal of ``source``) lies beyond int, where the hour transform wraps."""
    per = _HOUR_UNITS.get(source.name)
    return per is not None and not -(2**31) <= value // per < 2**31


def _transformer(transform: ts.Transform, source: it.PrimitiveType, result: it.PrimitiveType) -> Values:
    """Physical source values -> physical transformed values, computed by the transform kernels (CPU)."""

    def run(values: Sequence[Any]) -> list[Any]:
        return list(_transform_values(transform, source, result, tuple(values)))

    return run


@functools.lru_cache(maxsize=4096)
def _transform_values(
    transform: ts.Transform, source: it.PrimitiveType, result: it.PrimitiveType, values: tuple[Any, ...]
) -> tuple[Any, ...]:
    """Cached: a planner projects one filter through the same spec for every manifest."""
    from ..transforms.api import apply  # the one implementation of every transform

    out = apply(transform, source, _arrow.array(values, source), backend="cpu")
    return tuple(_arrow.physical(out, result))


def _one(values: Values, value: Any) -> Any:
    return values([value])[0]


def _bucket(pred: BoundPredicate, ref: BoundReference, values: Values, strict: bool) -> Expression | None:
    op = pred.op
    if op is (Op.NOT_EQ if strict else Op.EQ):
        return BoundPredicate(op, ref, (_one(values, pred.literal),))
    if op is (Op.NOT_IN if strict else Op.IN):
        return bound_set(op, ref, values(pred.literals))
    return None  # ranges and the other (in)equality cannot be projected through a hash


def _ordered(pred: BoundPredicate, ref: BoundReference, values: Values, strict: bool) -> Expression | None:
    """An order-preserving transform of a discrete domain (truncate of numbers, dates and times)."""
    op, t = pred.op, pred.ref.type
    if op.kind is Kind.SET:
        return bound_set(op, ref, values(pred.literals)) if (op is Op.NOT_IN) == strict else None
    v = pred.literal
    if not strict:
        if op is Op.EQ:
            return BoundPredicate(Op.EQ, ref, (_one(values, v),))
        if op in (Op.LT_EQ, Op.GT_EQ):
            return BoundPredicate(op, ref, (_one(values, v),))
        if op in (Op.LT, Op.GT):  # close the bound, then project it: x < v is x <= v - 1
            closed = lit.step(v, t, -1 if op is Op.LT else 1)
            if closed is None:
                return FALSE  # nothing lies beyond the type's limit
            return BoundPredicate(Op.LT_EQ if op is Op.LT else Op.GT_EQ, ref, (_one(values, closed),))
        return None
    if op in (Op.LT, Op.GT, Op.NOT_EQ):
        return BoundPredicate(op, ref, (_one(values, v),))
    if op in (Op.LT_EQ, Op.GT_EQ):  # open the bound: x <= v is x < v + 1
        opened = lit.step(v, t, 1 if op is Op.LT_EQ else -1)
        if opened is None:
            return BoundPredicate(Op.NOT_NULL, ref)  # every non-null value is within the limit
        return BoundPredicate(Op.LT if op is Op.LT_EQ else Op.GT, ref, (_one(values, opened),))
    return None  # =: neighbouring values share a partition


def _truncate_integer(
    pred: BoundPredicate, ref: BoundReference, values: Values, width: int, strict: bool
) -> Expression | None:
    """truncate[W] of int and long, whose spec formula ``v - (((v % W) + W) % W)`` falls below the type's
    minimum for the values of a "wrap zone" ``[MIN, MIN + W - (MIN mod W) - 1]`` when W does not divide
    2^32 (2^64). Writers (Iceberg Java, and the kernels, which must agree with them) store those values'
    partition wrapped around: one value, near the maximum, that is not a multiple of W. (In)equalities
    take the stored values from the kernels; ranges are projected with exact bounds and that partition
    admitted (inclusive) or left out (strict), so the wrapped value never reads as a large one."""
    op, t = pred.op, pred.ref.type
    if op.kind is Kind.SET or op in (Op.EQ, Op.NOT_EQ):
        return _ordered(pred, ref, values, strict)
    low, _ = it.INT_RANGE if t.name == "int" else it.LONG_RANGE
    zone_end = low + width - low % width - 1 if low % width else None  # the wrap zone is [low, zone_end]
    wrapped = BoundPredicate(Op.EQ, ref, (_one(values, low),))  # the wrap zone's stored partition

    def floor(v: int) -> int:
        return v - v % width

    v = pred.literal
    below = op in (Op.LT, Op.LT_EQ)
    if not strict:  # close the bound: x < v is x <= v - 1, x > v is x >= v + 1
        closed = v if op in (Op.LT_EQ, Op.GT_EQ) else lit.step(v, t, -1 if below else 1)
        if closed is None:
            return FALSE  # nothing lies beyond the type's limit
        if below:  # the range holds MIN, so the wrap zone's values
            legit = BoundPredicate(Op.LT_EQ, ref, (floor(closed),)) if floor(closed) >= low else FALSE
            return legit if zone_end is None else or_(legit, wrapped)
        if zone_end is not None and closed <= zone_end:
            return BoundPredicate(Op.NOT_NULL, ref)  # the wrap zone and every partition above it
        return BoundPredicate(Op.GT_EQ, ref, (floor(closed),))
    # open the bound: x <= v is x < v + 1, x >= v is x > v - 1
    opened = v if op in (Op.LT, Op.GT) else lit.step(v, t, 1 if below else -1)
    if opened is None:
        return BoundPredicate(Op.NOT_NULL, ref)  # every non-null value is within the limit
    if below:  # the wrap zone's partition, whatever its place among the others, holds the least values
        return BoundPredicate(Op.LT, ref, (floor(opened),)) if floor(opened) > low else FALSE
    above = BoundPredicate(Op.GT, ref, (floor(opened),)) if floor(opened) >= low else None
    if zone_end is None:
        assert above is not None
        return above
    legit = BoundPredicate(Op.NOT_NULL, ref) if above is None else above
    return and_(legit, BoundPredicate(Op.NOT_EQ, ref, wrapped.literals))


def _fit_decimal(ref: BoundReference, pred: Any) -> Expression:
    """``pred`` on a truncate[W] partition of a decimal with its literals beyond 38 digits resolved
    (truncating the least decimal(38, S) values gives 39 digits: no partition can hold one, no row of it can
    be written): ``= v`` is false, ``< v`` of a v below every value false and of one above every non-null
    partition, ``in`` without them. (A partition of P + 1 digits of a narrower decimal can be stored, so is
    kept.)"""
    t = ref.type
    assert isinstance(t, it.DecimalType) and isinstance(pred, BoundPredicate)
    limit, scale = 10**it.MAX_DECIMAL_PRECISION, t.scale

    def fits(v: Any) -> bool:
        return bool(abs(lit.unscaled(v, scale)) < limit)  # exact: Decimal arithmetic rounds at 28 digits

    op = pred.op
    if op.kind is Kind.SET:
        kept = tuple(v for v in pred.literals if fits(v))
        if len(kept) == len(pred.literals):
            return pred
        if kept:
            return bound_set(op, ref, kept)
        return FALSE if op is Op.IN else BoundPredicate(Op.NOT_NULL, ref)
    if op.kind is Kind.UNARY or fits(pred.literal):
        return pred
    if op is Op.EQ:
        return FALSE
    if op is Op.NOT_EQ:
        return BoundPredicate(Op.NOT_NULL, ref)
    below = pred.literal < 0  # the literal lies beyond the least value (else beyond the greatest)
    holds_all = below == (op in (Op.GT, Op.GT_EQ))  # x > v for v below every value holds for all of them
    return BoundPredicate(Op.NOT_NULL, ref) if holds_all else FALSE


def _int_era(
    projected: Expression | None, ref: BoundReference, transform: ts.Truncate, strict: bool
) -> Expression | None:
    """truncate[W] of a long column that may have been an int (promoted): its int rows were written to the
    partitions long rows go to, but for the int wrap zone's (see :func:`_truncate_integer`), stored as
    int arithmetic wraps it: a value near the int maximum that is no multiple of W, which no long value
    maps to. That partition is admitted by every inclusive projection and by no strict one, so its rows
    are always judged by the row filter (a long column that never was an int has no such partition)."""
    low = it.INT_RANGE[0]
    if projected is None or low % transform.width == 0:
        return projected  # W divides 2^31: no wrap zone
    wrapped = _one(_transformer(transform, it.INT, ref.type), low)
    if strict:
        return and_(projected, BoundPredicate(Op.NOT_EQ, ref, (wrapped,)))
    return or_(projected, BoundPredicate(Op.EQ, ref, (wrapped,)))


def _truncate_array(
    pred: BoundPredicate, ref: BoundReference, values: Values, width: int, strict: bool
) -> Expression | None:
    """truncate[W] of strings (W code points) and binaries (W bytes)."""
    op = pred.op
    if op.kind is Kind.SET:
        return bound_set(op, ref, values(pred.literals)) if (op is Op.NOT_IN) == strict else None
    v = pred.literal
    if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
        if len(v) < width:
            return BoundPredicate(op, ref, (v,))
        if len(v) == width:
            return BoundPredicate(Op.EQ if op is Op.STARTS_WITH else Op.NOT_EQ, ref, (v,))
        if (op is Op.STARTS_WITH) != strict:  # inclusive starts_with, strict not_starts_with
            return BoundPredicate(op, ref, (_one(values, v),))
        return None
    if strict:
        if op is Op.EQ:
            return None
        closed = {Op.LT_EQ: Op.LT, Op.GT_EQ: Op.GT}.get(op, op)
        return BoundPredicate(closed, ref, (_one(values, v),))
    if op is Op.NOT_EQ:
        return None
    widened = {Op.LT: Op.LT_EQ, Op.GT: Op.GT_EQ}.get(op, op)
    return BoundPredicate(widened, ref, (_one(values, v),))


def _with_next(values: Sequence[int]) -> list[int]:
    """``values`` plus ``v + 1`` for every negative ``v`` (the value a pre-0.11 writer produced)."""
    return sorted({*values, *(v + 1 for v in values if v < 0)})


def _fix_inclusive(projected: Expression | None) -> Expression | None:
    if not isinstance(projected, BoundPredicate) or projected.op.kind is Kind.UNARY:
        return projected
    op, ref = projected.op, projected.ref
    if op in (Op.LT, Op.LT_EQ) and projected.literal < 0:
        return BoundPredicate(op, ref, (projected.literal + 1,))
    if op in (Op.EQ, Op.IN):
        return bound_set(Op.IN, ref, _with_next(projected.literals))
    return projected


def _fix_strict(projected: Expression | None) -> Expression | None:
    if not isinstance(projected, BoundPredicate) or projected.op.kind is Kind.UNARY:
        return projected
    op, ref = projected.op, projected.ref
    if op in (Op.GT, Op.GT_EQ) and projected.literal <= 0:
        return BoundPredicate(op, ref, (projected.literal + 1,))
    if op in (Op.NOT_EQ, Op.NOT_IN):
        return bound_set(Op.NOT_IN, ref, _with_next(projected.literals))
    return projected
